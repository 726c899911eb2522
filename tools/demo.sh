#!/usr/bin/env bash
# Installs what ratchet needs, builds the ratchet command, the plugins and the
# demo, and runs the demo (build/default/bin/ratchet-demo; --help for its flags).
set -euo pipefail
cd "$(dirname "$0")/.."

tools/deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)" --target ratchet-demo ratchet-cli \
  imdb rotten_tomatoes sify netflix amazon_prime
exec build/default/bin/ratchet-demo "$@"
