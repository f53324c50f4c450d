#!/usr/bin/env bash
# Installs what the tests need, builds with AddressSanitizer and UndefinedBehaviorSanitizer
# (leak detection on), and runs the whole suite with ctest; then the threaded tests under
# ThreadSanitizer (scripts/tsan.sh), and each libFuzzer harness for 30 s (scripts/fuzz.sh). Extra
# arguments go to ctest (e.g. `scripts/test.sh -L cpu`) and pick a subset of the ASan suite,
# without the ThreadSanitizer and fuzzer runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test
cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=Debug -DCINDER_SANITIZE=ON
cmake --build build/asan -j"$(nproc)"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp"
(cd build/asan && ctest --output-on-failure -j2 "$@")
if [ $# -eq 0 ]; then
  scripts/tsan.sh
  scripts/fuzz.sh 30
else
  echo "test.sh: a subset was asked for; the ThreadSanitizer run (scripts/tsan.sh) and the" \
    "fuzzers (scripts/fuzz.sh) are skipped"
fi
