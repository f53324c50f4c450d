#!/usr/bin/env bash
# libFuzzer run: builds the harnesses of fuzz/ (fuzz/CMakeLists.txt says what each covers) with
# clang, AddressSanitizer, UndefinedBehaviorSanitizer and libFuzzer's coverage in build/fuzz, and
# runs each for SECONDS (default 30), one after the other, on a copy of its seed corpus
# (fuzz/corpus/<target> is never written to; what a run adds stays in build/fuzz/run/<target>).
# Prints the executions of each target. Exits non-zero when a target crashed, leaked, broke one
# of the harness's invariants (fuzz/fuzz_common.h), ran out of memory or timed out; the input is
# saved under build/fuzz/crashes/<target>/ and replays with `build/fuzz/fuzz/fuzz_<target> FILE`.
#   scripts/fuzz.sh              every target, 30 s each (scripts/test.sh runs this)
#   scripts/fuzz.sh 600 ops idx  a longer run of some targets
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors idx extgen ops)
case "$seconds" in
  '' | *[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, got '$seconds'" >&2; exit 2 ;;
esac

scripts/deps.sh --test
cmake -S . -B build/fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCINDER_SANITIZE=ON -DCINDER_FUZZ=ON -DCINDER_CUDA=OFF -DCINDER_TESTS=OFF \
  -DCINDER_BENCHMARKS=OFF -DCINDER_EXAMPLES=OFF -DCINDER_INSTALL=OFF >/dev/null
cmake --build build/fuzz -j"$(nproc)" --target fuzzers

# The harnesses set their own sanitizer options (__asan_default_options: allocations over 256 MB
# get NULL); the suite's (scripts/test.sh) would override them.
unset ASAN_OPTIONS UBSAN_OPTIONS
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp"
export OMP_NUM_THREADS=1 # one input at a time; the pool's threads would only share the cores

failed=()
for t in "${targets[@]}"; do
  bin="build/fuzz/fuzz/fuzz_$t"
  if [ ! -x "$bin" ] || [ ! -d "fuzz/corpus/$t" ]; then
    echo "fuzz.sh: no target '$t' (targets: safetensors idx extgen ops)" >&2
    exit 2
  fi
  work="build/fuzz/run/$t"
  crashes="build/fuzz/crashes/$t"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$crashes"
  cp fuzz/corpus/"$t"/* "$work/corpus/"
  log="$work/fuzz.log"
  rc=0
  "$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -max_len=4096 \
    -print_final_stats=1 -artifact_prefix="$crashes/" "$work/corpus" >"$log" 2>&1 || rc=$?
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
  rate=$(awk '/stat::average_exec_per_sec/ {print $2}' "$log")
  units=$(find "$work/corpus" -type f | wc -l)
  if [ "$rc" -ne 0 ]; then
    echo "fuzz_$t: FAILED (exit $rc) after ${execs:-?} executions; input saved in $crashes/"
    grep -E "ERROR|SUMMARY|invariant|runtime error|^    #[0-9]+" "$log" | head -40 || true
    echo "  (whole log: $log)"
    failed+=("$t")
  else
    echo "fuzz_$t: ${execs:-?} executions in ${seconds} s (${rate:-?} exec/s), corpus $units inputs, no crash"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: ${failed[*]} failed"
  exit 1
fi
