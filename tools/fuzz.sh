#!/usr/bin/env bash
# Fuzzes ratchet's parsers with AFL++ (Debian's afl++): builds the targets of
# tests/fuzz/ with afl-gcc-fast/afl-g++-fast (and UBSan, so undefined
# behaviour is a finding) in build/fuzz, runs afl-fuzz on each from its
# corpus for SECONDS, then prints what each run reached and found.
#
# Usage: tools/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default: 60, every target)
#        tools/fuzz.sh build [TARGET...]      only builds the targets
#        tools/fuzz.sh minimize [TARGET...]
#          merges the last run's queue into tests/fuzz/corpus/TARGET: afl-cmin,
#          then at most 40 inputs keeping the most coverage (pick_corpus.py)
#
# A run's inputs that crashed or broke an invariant are in
# build/fuzz/findings/TARGET/default/crashes/; replay one with
# build/default/tests/fuzz/fuzz_TARGET FILE. The exit code is 1 when any run
# found something, so CI fails on a finding.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
all_targets=(toml duration http_date rate_headers job_args plugin_abi web_request)
build="$root/build/fuzz"

mode=run
seconds=60
if [ "${1:-}" = minimize ] || [ "${1:-}" = build ]; then
  mode="$1"
  shift
elif [[ "${1:-}" =~ ^[0-9]+$ ]]; then
  seconds="$1"
  shift
fi
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] || {
    echo "fuzz.sh: unknown target '$t' (targets: ${all_targets[*]})" >&2
    exit 2
  }
done

tools/deps.sh fuzz

# afl-g++-fast's GCC plugin refuses a compiler whose version string differs
# from the one it was built against, even for a Debian point release of the
# same GCC (12.2.0-14 vs 12.2.0-14+deb12u1). When that check is what fails, a
# copy of the plugin is used whose call to the check goes to a shim that
# accepts, through wrappers that only the compiles of build/fuzz use.
compilers() {
  local dir="$build/afl"
  mkdir -p "$dir"
  local probe="$dir/probe.c"
  echo 'int main(void) { return 0; }' >"$probe"
  if AFL_QUIET=1 afl-gcc-fast "$probe" -o "$dir/probe" >"$dir/probe.log" 2>&1; then
    printf '%s\n' afl-gcc-fast afl-g++-fast
    return
  fi
  if ! grep -q "incompatible versions" "$dir/probe.log"; then
    cat "$dir/probe.log" >&2
    echo "fuzz.sh: afl-gcc-fast cannot compile" >&2
    exit 1
  fi
  local path="$dir/path"
  mkdir -p "$path"
  for f in /usr/lib/afl/*; do ln -sf "$f" "$path/"; done
  rm -f "$path/afl-gcc-pass.so"
  # Same-length rename of the imported symbol, so the ELF layout is unchanged.
  python3 - "$path/afl-gcc-pass.so" <<'EOF'
import sys
data = open("/usr/lib/afl/afl-gcc-pass.so", "rb").read()
old, new = b"plugin_default_version_check", b"ratchet_afl_gcc_version_okay"
assert data.count(old) == 1, "unexpected afl-gcc-pass.so"
open(sys.argv[1], "wb").write(data.replace(old, new))
EOF
  printf 'int ratchet_afl_gcc_version_okay(void *a, void *b) { (void)a; (void)b; return 1; }\n' >"$dir/shim.c"
  gcc -shared -fPIC -O2 "$dir/shim.c" -o "$path/version_shim.so"
  for pair in "cc afl-gcc-fast" "c++ afl-g++-fast"; do
    set -- $pair
    cat >"$dir/$1" <<EOF
#!/bin/sh
AFL_QUIET=1 AFL_PATH="$path" LD_PRELOAD="$path/version_shim.so\${LD_PRELOAD:+:\$LD_PRELOAD}" exec $2 "\$@"
EOF
    chmod +x "$dir/$1"
  done
  "$dir/cc" "$probe" -o "$dir/probe" >"$dir/probe.log" 2>&1 || {
    cat "$dir/probe.log" >&2
    echo "fuzz.sh: afl-gcc-fast cannot compile, even with the version shim" >&2
    exit 1
  }
  printf '%s\n' "$dir/cc" "$dir/c++"
}

build_targets() {
  local tools
  mapfile -t tools < <(compilers)
  # The compilers are wrapper scripts made fresh in each checkout, which
  # ccache would tell apart by their times; naming them by the AFL++ and GCC
  # versions lets a fresh clone reuse the objects of an earlier one.
  CCACHE_COMPILERCHECK="string:afl++-$(dpkg-query -W -f='${Version}' afl++)-gcc-$(gcc -dumpfullversion)"
  export CCACHE_COMPILERCHECK
  local ubsan="-fsanitize=undefined -fsanitize=float-cast-overflow -fno-sanitize-recover=all"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER="${tools[0]}" -DCMAKE_CXX_COMPILER="${tools[1]}" \
    -DCMAKE_C_FLAGS="$ubsan" -DCMAKE_CXX_FLAGS="$ubsan" -DCMAKE_EXE_LINKER_FLAGS="$ubsan" \
    -DCMAKE_SHARED_LINKER_FLAGS="$ubsan" -DCMAKE_MODULE_LINKER_FLAGS="$ubsan" \
    -DRATCHET_FUZZ=ON -DRATCHET_BUILD_BENCH=OFF -DRATCHET_BUILD_EXAMPLES=OFF >/dev/null
  local names=()
  for t in "${targets[@]}"; do names+=("fuzz_$t"); done
  flock /tmp/ratchet-build.lock cmake --build "$build" -j2 --target "${names[@]}"
}

export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1 AFL_NO_AFFINITY=1
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:symbolize=0"

stat_of() { sed -n "s/^$2 *: //p" "$1" | head -n1; }

if [ "$mode" = minimize ]; then
  build_targets
  for t in "${targets[@]}"; do
    queue="$build/findings/$t/default/queue"
    [ -d "$queue" ] || {
      echo "fuzz.sh: no queue for $t; run tools/fuzz.sh SECONDS $t first" >&2
      exit 1
    }
    merged="$build/merge/$t"
    rm -rf "$merged" "$build/cmin/$t"
    mkdir -p "$merged" "$build/cmin" "$build/pick"
    cp "$root/tests/fuzz/corpus/$t"/* "$merged/"
    for f in "$queue"/id:*; do cp "$f" "$merged/q$(basename "$f" | cut -c4-9)"; done
    nice -n 19 afl-cmin -i "$merged" -o "$build/cmin/$t" -m none -t 5000 -- "$build/tests/fuzz/fuzz_$t" >/dev/null
    # afl-cmin keeps every tuple, often hundreds of inputs; at most 40 stay.
    kept=$(nice -n 19 python3 "$root/tests/fuzz/pick_corpus.py" "$build/cmin/$t" "$build/pick/$t" 40 \
      -- "$build/tests/fuzz/fuzz_$t")
    rm -rf "$root/tests/fuzz/corpus/$t"
    cp -r "$build/pick/$t" "$root/tests/fuzz/corpus/$t"
    echo "$t: $(ls "$merged" | wc -l) inputs, $(ls "$build/cmin/$t" | wc -l) after afl-cmin; $kept"
  done
  exit 0
fi

build_targets
[ "$mode" = build ] && exit 0
# One target's run: its row of the table in $out/row, its findings in
# $out/found (one path a line). Targets run side by side, one a core.
fuzz_one() {
  local t="$1"
  local out="$build/findings/$t"
  rm -rf "$out"
  mkdir -p "$out"
  local dict="$root/tests/fuzz/dict/$t.dict"
  case "$t" in job_args | plugin_abi) dict="$root/tests/fuzz/dict/json.dict" ;; esac
  # The CPU time of the run: afl-fuzz, its fork server and every input it
  # ran. The fork server is not reaped by afl-fuzz, so `time` misses most of
  # it; a cpuacct cgroup (when one can be made) counts the whole tree.
  local cg=""
  if [ -w /sys/fs/cgroup/cpuacct ]; then
    cg="/sys/fs/cgroup/cpuacct/ratchet-fuzz-$$-$t"
    mkdir -p "$cg" 2>/dev/null || cg=""
  fi
  TIMEFORMAT='%U %S'
  { time (
    if [ -n "$cg" ]; then echo "$BASHPID" 2>/dev/null >"$cg/tasks" || true; fi
    nice -n 19 afl-fuzz -V "$seconds" -i "$root/tests/fuzz/corpus/$t" -o "$out" -x "$dict" -m none \
      -t 2000 -- "$build/tests/fuzz/fuzz_$t" >"$out/afl.log" 2>&1
  ); } 2>"$out/cpu" || {
    tail -n 20 "$out/afl.log" >&2
    echo "fuzz.sh: afl-fuzz failed on $t (log: $out/afl.log)" >&2
    return 1
  }
  local stats="$out/default/fuzzer_stats"
  local user sys cpu
  read -r user sys <"$out/cpu"
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%d", u + s }')
  if [ -n "$cg" ]; then
    # Stragglers of the run (a fork server on its way out) are gone first.
    for _ in 1 2 3 4 5; do [ -s "$cg/tasks" ] || break; sleep 0.2; done
    local usage
    usage=$(cat "$cg/cpuacct.usage" 2>/dev/null || echo 0)
    [ "$usage" -gt 0 ] && cpu=$((usage / 1000000000))
    rmdir "$cg" 2>/dev/null || true
  fi
  local crashes hangs
  crashes=$(stat_of "$stats" saved_crashes)
  hangs=$(stat_of "$stats" saved_hangs)
  printf '%-13s %7s %10s %9s %11s %7s %8s %6s\n' "$t" "$cpu" "$(stat_of "$stats" execs_done)" \
    "$(stat_of "$stats" execs_per_sec)" "$(stat_of "$stats" bitmap_cvg)" \
    "$(stat_of "$stats" edges_found)/$(stat_of "$stats" total_edges)" "$(stat_of "$stats" corpus_count)" \
    "$((crashes + hangs))" >"$out/row"
  : >"$out/found"
  for f in "$out/default/crashes"/id:* "$out/default/hangs"/id:*; do
    [ -e "$f" ] && echo "$f" >>"$out/found"
  done
  return 0
}

# As many targets at once as there are cores: the same time for each, the
# whole run in a fraction of the wall time.
jobs_at_once=$(nproc)
pids=()
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_at_once" ]; do wait -n || true; done
  fuzz_one "$t" &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
[ "$failed" -eq 0 ] || exit 1
found=0
printf '%-13s %7s %10s %9s %11s %7s %8s %6s\n' target cpu_s execs execs/s bitmap_cvg edges corpus finds
for t in "${targets[@]}"; do
  out="$build/findings/$t"
  cat "$out/row"
  if [ -s "$out/found" ]; then
    found=1
    while read -r f; do echo "  $t finding: $f" >&2; done <"$out/found"
  fi
done
if [ "$found" -ne 0 ]; then
  echo "fuzz.sh: findings above; replay one with build/default/tests/fuzz/fuzz_TARGET FILE" >&2
  exit 1
fi
