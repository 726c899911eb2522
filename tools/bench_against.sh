#!/usr/bin/env bash
# The SQLite engine benchmark (bench/engine) of this tree beside the same
# benchmark built from an earlier commit, run alternately in one session on
# the same disk, so that a change's cost shows as a ratio rather than as two
# figures taken on different days.
#
# Usage: tools/bench_against.sh COMMIT [--rounds N] [--jobs N] [--workers N]
#
# COMMIT is built in a scratch worktree under build/against-<commit> (kept
# for the next run; ccache makes rebuilds cheap). Each round runs both
# benchmarks, in turns which goes first; the table gives the median of
# every figure over the rounds and new/old.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
die() {
  echo "bench_against: $*" >&2
  exit 1
}

[ $# -ge 1 ] || die "usage: $0 COMMIT [--rounds N] [--jobs N] [--workers N]"
commit=$(git -C "$root" rev-parse --verify --quiet "$1^{commit}") || die "$1 is not a commit of this repository"
shift
rounds=3
bench_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --jobs | --workers) bench_args+=("$1" "$2"); shift 2 ;;
    *) die "unknown argument $1 (usage: $0 COMMIT [--rounds N] [--jobs N] [--workers N])" ;;
  esac
done

jobs=${RATCHET_BUILD_JOBS:-$(nproc)}
short=${commit:0:12}
old_tree=$root/build/against-$short
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$root")}

build() {  # tree
  (cd "$1" && cmake --preset default >/dev/null && cmake --build --preset default -j "$jobs" \
    --target ratchet_engine_bench >/dev/null) || die "building the benchmark in $1 failed"
}

if [ ! -e "$old_tree/.git" ]; then
  git -C "$root" worktree add --detach --force "$old_tree" "$commit" >/dev/null 2>&1 ||
    die "cannot check out $short in $old_tree"
fi
echo "building bench/engine at $short (old) and at the working tree (new)"
build "$old_tree"
build "$root"
old_bin=$old_tree/build/default/bench/engine/ratchet_engine_bench
new_bin=$root/build/default/bench/engine/ratchet_engine_bench

scratch=$(mktemp -d "${TMPDIR:-/tmp}/ratchet-bench-against.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# One line per figure: "<sync> <a|b|c> <jobs/s>", from the benchmark's table.
figures() {
  awk -F'|' '$1 ~ /^(NORMAL|FULL)/ {
      gsub(/ /, "", $1)
      split("2 3 5", col, " ")
      for (k = 1; k <= 3; k++) { v = $(col[k]); gsub(/ jobs\/s| /, "", v); print $1, substr("abc", k, 1), v }
    }'
}

# Odd rounds run the old benchmark first, even rounds the new one, so that
# whatever the first run of a pair leaves behind (a warm page cache, a
# hotter CPU) favours neither side.
for r in $(seq 1 "$rounds"); do
  order="old new"
  [ $((r % 2)) -eq 0 ] && order="new old"
  for side in $order; do
    bin=$old_bin
    [ "$side" = new ] && bin=$new_bin
    mkdir -p "$scratch/db"
    "$bin" --dir "$scratch/db" "${bench_args[@]}" >"$scratch/$side.$r.out" 2>&1 ||
      die "the $side benchmark failed: $(tail -3 "$scratch/$side.$r.out")"
    rm -rf "$scratch/db"
    figures <"$scratch/$side.$r.out" | sed "s/^/$side /" >>"$scratch/all"
    echo "round $r $side: $(figures <"$scratch/$side.$r.out" | awk '{printf "%s/%s %s  ", $1, $2, $3}')"
  done
done

echo
echo "median of $rounds rounds, jobs/s (a: raw 8 commits, b: engine 5-step, c: engine 1-step)"
printf '%-8s %-3s %12s %12s %8s\n' sync fig "old $short" new new/old
for sync in NORMAL FULL; do
  for fig in a b c; do
    med() {
      awk -v s="$1" -v y="$sync" -v f="$fig" '$1 == s && $2 == y && $3 == f { print $4 }' "$scratch/all" |
        sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
    }
    o=$(med old)
    n=$(med new)
    printf '%-8s %-3s %12.0f %12.0f %8.3f\n' "$sync" "$fig" "$o" "$n" "$(awk -v a="$n" -v b="$o" 'BEGIN { print a / b }')"
  done
done
