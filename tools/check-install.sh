#!/usr/bin/env bash
# Installs the built ratchet into a temporary prefix, then configures, builds
# and runs a host program against it through find_package(ratchet).
# Usage: tools/check-install.sh BUILD_DIR HOST_SOURCE_DIR
set -euo pipefail
build_dir="$1"
host_src="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$host_src" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib:$work/prefix/lib/x86_64-linux-gnu" "$work/build/ratchet_host_example"
