#!/usr/bin/env bash
# ThreadSanitizer run: builds the library and its threaded tests with -fsanitize=thread in
# build/tsan (CINDER_TSAN=ON, RelWithDebInfo, no CUDA) and runs them: the CPU pool and the counters
# across threads (test_parallel), and two models training on two threads at once beside tensors
# shared by several threads (test_threads). The first report stops the run (halt_on_error), so a
# race is a failed test. scripts/test.sh runs this after the ASan suite; extra arguments go to
# ctest. The pool gets 4 threads (OMP_NUM_THREADS) so that its workers, the callers and the
# training threads interleave even on a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test
cmake -S . -B build/tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCINDER_TSAN=ON -DCINDER_CUDA=OFF
cmake --build build/tsan -j"$(nproc)" --target test_parallel test_threads
# suppressions: third-party code only (scripts/tsan.supp says which and why)
export TSAN_OPTIONS="halt_on_error=1:abort_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}"
cd build/tsan
ctest --output-on-failure -R '^(parallel|threads)$' "$@"
