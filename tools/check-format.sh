#!/usr/bin/env bash
# Fails when any C or C++ source of ratchet differs from its clang-format
# layout, and lists the files. Usage: tools/check-format.sh [CLANG_FORMAT]
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format="${1:-clang-format}"

mapfile -t files < <(find engine include plugins tests tools bench examples \
  -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.hpp.in' \) 2>/dev/null | sort)
# One clang-format per batch of files: starting one per file took a minute.
# Each misformatted line is reported as "FILE:LINE:COL: error: ...".
report="$(printf '%s\0' "${files[@]}" |
  xargs -0 -n 50 -P "$(nproc)" "$clang_format" --dry-run -Werror 2>&1 >/dev/null || true)"
mapfile -t bad < <(printf '%s\n' "$report" | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: .*/\1/p' | sort -u)
if [ ${#bad[@]} -gt 0 ] || { [ -n "$report" ] && ! printf '%s\n' "$report" | grep -q ': error: '; }; then
  echo "These files are not clang-formatted (fix with: clang-format -i FILE):" >&2
  if [ ${#bad[@]} -gt 0 ]; then printf '  %s\n' "${bad[@]}" >&2; else printf '%s\n' "$report" >&2; fi
  exit 1
fi
echo "${#files[@]} files clang-formatted"
