#!/usr/bin/env bash
# Fails when any C or C++ source of ratchet differs from its clang-format
# layout, and lists the files. Usage: tools/check-format.sh [CLANG_FORMAT]
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format="${1:-clang-format}"

mapfile -t files < <(find engine include plugins tests tools bench examples \
  -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.hpp.in' \) 2>/dev/null | sort)
bad=()
for f in "${files[@]}"; do
  if ! "$clang_format" --dry-run -Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "These files are not clang-formatted (fix with: clang-format -i FILE):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "${#files[@]} files clang-formatted"
