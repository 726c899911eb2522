#!/usr/bin/env bash
# ratchet on PostgreSQL side by side with graphile-worker and pg-boss, on one
# throw-away cluster (tools/pg_cluster.sh: synchronous_commit = on, fsync on)
# in one run; then ratchet's claim time with a million jobs queued, and
# ratchet on SQLite for reference.
#
# Usage: tools/bench_pg.sh [--jobs N] [--concurrency C] [--no-million] [--no-sqlite]
#   --jobs N         jobs pre-enqueued per run (default 4000)
#   --concurrency C  jobs in flight over all worker processes (default 32;
#                    must divide by 4); each of P = 1, 2, 4 processes runs C/P
#
# Every system drains the same N pre-enqueued no-op jobs with P worker
# processes; jobs/s runs from the moment the workers are told to go to the
# last job's committed completion. ratchet also runs five-step jobs (each
# step a durable checkpoint); the peers have no steps. VmHWM is the largest
# peak resident memory of one worker process.
#
# Needs Node 20 and npm (the peers come from the npm registry, pinned in
# bench/pg_peers/package-lock.json). Build parallelism: RATCHET_BUILD_JOBS
# (default: the number of cores).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
jobs=4000
concurrency=32
million=1
sqlite=1
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) jobs=$2; shift 2 ;;
    --concurrency) concurrency=$2; shift 2 ;;
    --no-million) million=0; shift ;;
    --no-sqlite) sqlite=0; shift ;;
    *) echo "usage: $0 [--jobs N] [--concurrency C] [--no-million] [--no-sqlite]" >&2; exit 2 ;;
  esac
done
[ $((concurrency % 4)) -eq 0 ] || { echo "bench_pg: --concurrency must divide by 4" >&2; exit 2; }

die() {
  echo "bench_pg: $*" >&2
  exit 1
}

"$root/tools/deps.sh"
command -v node >/dev/null && command -v npm >/dev/null || die "Node 20 and npm are needed (apt-get install nodejs npm, or nodesource)"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 20 ] || die "Node 20 or newer is needed (found $(node --version))"

# The peers, installed once per lock file.
peers=$root/bench/pg_peers
if ! cmp -s "$peers/package-lock.json" "$peers/node_modules/.ratchet-lock" 2>/dev/null; then
  (cd "$peers" && npm ci --silent --no-audit --no-fund >/dev/null) || die "npm ci failed in $peers"
  cp "$peers/package-lock.json" "$peers/node_modules/.ratchet-lock"
fi

cd "$root"
cmake --preset default >/dev/null
cmake --build --preset default -j "${RATCHET_BUILD_JOBS:-$(nproc)}" --target ratchet_engine_bench >/dev/null ||
  die "building ratchet_engine_bench failed"
bench=$root/build/default/bench/engine/ratchet_engine_bench

dir=$(mktemp -d /tmp/ratchet-bench-pg.XXXXXX)
cleanup() {
  "$root/tools/pg_cluster.sh" stop "$dir" >/dev/null 2>&1 || true
  rm -rf -- "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$root/tools/pg_cluster.sh" start "$dir" >/dev/null
set -a
# shellcheck source=/dev/null
. "$dir/env"
set +a
url=$RATCHET_TEST_PG_URL
results=$dir/results
: >"$results"

psql_q() { psql -X -A -t -d "$url" -c "$1"; }
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(free -g | awk '/Mem:/ {print $2}') GiB"
echo "server: $(psql_q 'SHOW server_version'), synchronous_commit = $(psql_q 'SHOW synchronous_commit'), fsync = $(psql_q 'SHOW fsync'), shared_buffers = $(psql_q 'SHOW shared_buffers')"
echo "each run: $jobs pre-enqueued no-op jobs, $concurrency jobs in flight over all worker processes"
echo

admin=$RATCHET_TEST_PG_ADMIN
# Each run starts from a checkpoint, so that none pays for the WAL of the one before.
checkpoint() { psql -X -q -d "$admin" -c CHECKPOINT; }
ratchet_run() { "$bench" --postgres "$url" --concurrency "$concurrency" --processes "$@"; }
gw_run() { node "$peers/graphile_worker.js" --url "$url" --concurrency "$concurrency" --processes "$@"; }
boss_run() { node "$peers/pg_boss.js" --url "$url" --concurrency "$concurrency" --processes "$@"; }

# A warm-up of each system, not counted: a new cluster creates its WAL files
# and fills its caches during the first run, whichever system that is.
echo "== warm-up (not counted)"
warm=$(((jobs + 3) / 4))
ratchet_run 1 --jobs "$warm" >/dev/null
gw_run 1 --jobs "$warm" >/dev/null
boss_run 1 --jobs "$warm" --mode batch-notify >/dev/null

echo "== ratchet $(git -C "$root" describe --always --dirty 2>/dev/null || echo '?')"
for p in 1 2 4; do
  checkpoint
  ratchet_run "$p" --jobs "$jobs" >>"$results"
done
grep -m1 "^ratchet on PostgreSQL" "$results"
for p in 1 2 4; do
  echo "== graphile-worker and pg-boss, $p process(es)"
  checkpoint
  gw_run "$p" --jobs "$jobs" >>"$results"
  checkpoint
  boss_run "$p" --jobs "$jobs" --mode batch >>"$results"
  checkpoint
  boss_run "$p" --jobs "$jobs" --mode batch-notify >>"$results"
done
echo

# One row per system and process count: the RESULT lines' fields.
awk '
  /^RESULT / {
    delete f
    for (i = 2; i <= NF; i++) { k = substr($i, 1, index($i, "=") - 1); f[k] = substr($i, index($i, "=") + 1) }
    sys = f["system"]
    if (sys == "pg-boss" && f["settings"] ~ /notifyWorker=true/) sys = "pg-boss+notifyWorker"
    key = sys SUBSEP f["processes"]
    if (!(key in seen)) { seen[key] = 1; order[++n] = key; name[key] = sys; procs[key] = f["processes"]; conc[key] = f["concurrency"] }
    if (f["steps"] == 1) one[key] = f["rate"]; else if (f["steps"] == 5) five[key] = f["rate"]
    if (f["vmhwm_kib"] + 0 > hwm[key] + 0) hwm[key] = f["vmhwm_kib"]
    if (f["version"] != "") ver[sys] = f["version"]
    if (!(sys in set)) { set[sys] = f["settings"]; sorder[++m] = sys }
  }
  END {
    printf "%-22s | %9s | %17s | %15s | %16s | %16s\n", "system", "processes", "total concurrency", "one-step jobs/s", "five-step jobs/s", "VmHWM (max, MiB)"
    printf "%-22s-+-%9s-+-%17s-+-%15s-+-%16s-+-%16s\n", "----------------------", "---------", "-----------------", "---------------", "----------------", "----------------"
    for (j = 1; j <= m; j++) for (i = 1; i <= n; i++) {
      k = order[i]
      if (name[k] != sorder[j]) continue
      printf "%-22s | %9s | %17s | %15.0f | %16s | %16.1f\n", name[k], procs[k], conc[k], one[k], (k in five) ? sprintf("%.0f", five[k]) : "n/a", hwm[k] / 1024
    }
    print ""
    for (i = 1; i <= m; i++) {
      s = sorder[i]
      printf "%s%s: %s\n", s, (s in ver) ? " " ver[s] : "", set[s]
    }
  }' "$results"
echo "(settings shown for one process; per-process figures scale as C/P. pg-boss: its least polling interval;"
echo " pg-boss+notifyWorker: the handler also calls notifyWorker(id) after each batch, an API call rather than a setting.)"

if [ "$million" -eq 1 ]; then
  echo
  "$bench" --postgres "$url" --million --workers "$concurrency" | grep -v '^RESULT'
fi
if [ "$sqlite" -eq 1 ]; then
  echo
  echo "== ratchet on SQLite, for reference (one process, $concurrency workers, enqueue while running)"
  "$bench" --jobs "$jobs" --workers "$concurrency" --dir "$dir"
fi
