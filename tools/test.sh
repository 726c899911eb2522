#!/usr/bin/env bash
# Installs what ratchet needs, builds it with the given CMake preset
# (default: "default") and runs every test. Usage: tools/test.sh [PRESET]
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"

tools/deps.sh
tests/browser/run.sh install  # puppeteer-core from package-lock.json, for the browser tests
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
ctest --preset "$preset" -j "$(nproc)"
