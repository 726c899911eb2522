#!/usr/bin/env bash
# Runs the dashboard's browser tests against a running `ratchet web`:
#   RATCHET_WEB_URL=http://127.0.0.1:PORT RATCHET_WEB_TOKEN=... [RATCHET_SCREENSHOTS=DIR] [CHROMIUM=...] ./run.sh
#   ./run.sh install   only installs (tools/test.sh does, before the tests run)
# Installs puppeteer-core from package-lock.json first when node_modules is
# missing or older than the lock file (puppeteer-core downloads no browser).
set -euo pipefail
cd "$(dirname "$0")"

stamp=node_modules/.package-lock.json   # npm writes it on every install
if [[ ! -d node_modules/puppeteer-core || ! -f $stamp || package-lock.json -nt $stamp || package.json -nt $stamp ]]; then
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
fi

[[ ${1:-} == install ]] && exit 0
exec node --test "$@" dashboard.test.mjs
