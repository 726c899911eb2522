#!/usr/bin/env bash
# Installs the Debian packages ratchet builds against. Idempotent: when every
# package is already present it prints nothing and touches no package list.
# Usage: tools/deps.sh [fuzz]   (fuzz: also AFL++, for tools/fuzz.sh)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config clang-format ccache
  libsqlitecpp-dev libsqlite3-dev sqlite3
  libboost-dev libboost-filesystem-dev
  libcurl4-openssl-dev libssl-dev libabsl-dev
  libtomlplusplus-dev
  libgtest-dev libgmock-dev librapidcheck-dev libbenchmark-dev
  libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcpp-httplib-dev
  prometheus-cpp-dev  # the metrics text of `ratchet run --metrics` (prometheus-cpp core only)
  nginx faketime  # the fault-injection tests: a rate limiter we did not write, a stepped clock
  postgresql libpq-dev  # the PostgreSQL backend and its tests (tools/pg_cluster.sh)
  chromium  # the dashboard's browser tests (tests/browser, driven by puppeteer-core from npm)
)
if [ "${1:-}" = fuzz ]; then packages+=(afl++); fi
# Node.js and npm run the browser tests; a machine that has them already
# (from anywhere) keeps its own.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then packages+=(nodejs npm); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "ratchet: installing ${missing[*]}" >&2
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq >/dev/null
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
