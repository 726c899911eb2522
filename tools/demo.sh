#!/usr/bin/env bash
# Installs what ratchet needs, builds it and runs the demo.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"
exec build/default/examples/host/ratchet_host_example "$@"
