#!/usr/bin/env bash
# The CUDA backend and the NCCL engine on a GPU machine that cannot install packages (the
# `device` machine some sessions are lent: the CUDA toolkit and PyTorch, but no OpenBLAS, oneDNN
# or Open MPI, and no package registry).
#
#   scripts/gpu-check.sh pack
#       Here: builds build/gpu (RelWithDebInfo, CUDA on, no sanitizers) and writes .gpu/ (git-ignored,
#       carried to the GPU machine): the build's programs and libraries, the libraries they load
#       that are neither CUDA's nor the C runtime's (OpenBLAS, oneDNN, ...), Open MPI's files
#       with the libraries they load, Fashion-MNIST and the GPT benchmark's text.
#   scripts/gpu-check.sh run [--budget S] [--tests each|whole|no] [--train] [--bench LIST]
#       There, from the repository root: puts those files in place (Open MPI's copied into / without
#       replacing a file already there), finds CUDA's libraries (the toolkit's, cuDNN's and NCCL's
#       from PyTorch's wheels), then runs, each under a time limit and while the S seconds of the
#       budget (default 400) last: each test of test_cuda_ops in its own process (a crash in one
#       hides no other; --tests each, the default), the whole program once (--tests whole: only
#       that), cuda_static_link, the extension example's CUDA
#       kernel (test_fused_linear_relu), test_dist_nccl under
#       `mpirun -np 1` (one rank per GPU), test_cuda_ops under compute-sanitizer's memcheck, and
#       with --train two epochs of `cinder train --device cuda` for the MLP and the CNN, and
#       with --bench scripts/bench.sh --device cuda --reps 1 --only LIST against the machine's
#       PyTorch. Logs go to $OUT (the device tool's folder) or out/gpu as logs.tgz, with the
#       summary, the failing lines and the machine's description beside it; the summary to stdout.
set -uo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
shift || true

pack() {
  set -e
  cmake -S . -B build/gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCINDER_CUDA=ON -DCINDER_SANITIZE=OFF \
    > /tmp/gpu-check-cmake.log
  cmake --build build/gpu -j"$(nproc)" > /tmp/gpu-check-build.log
  rm -rf .gpu
  mkdir -p .gpu/lib .gpu/mpi
  local progs=(build/gpu/cinder build/gpu/tests/test_cuda_ops build/gpu/tests/cuda_static_link
               build/gpu/tests/test_dist_nccl build/gpu/examples/extension/test_fused_linear_relu)
  local f
  for f in build/gpu/bench/bench_*; do [ -x "$f" ] && [ -f "$f" ] && progs+=("$f"); done
  local libs=(build/gpu/libcinder*.so*)
  tar cJf .gpu/build.tar.xz "${progs[@]}" "${libs[@]}"

  # what they load, less the C runtime (the GPU machine has its own, newer) and CUDA's libraries
  # (found there); the rest goes to .gpu/lib
  { ldd "${progs[@]}" "${libs[@]}" 2>/dev/null || true; } | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' |
    sort -u | grep -v -E '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' |
    { grep -v -E '^/usr/local/(cuda|lib/libcudart)|/build/gpu/' || true; } |
    while read -r f; do cp -L "$f" .gpu/lib/; done

  # Open MPI (Debian's layout, for mpirun, orted and their plugins) and what those load
  local root=.gpu/mpiroot
  dpkg -L openmpi-bin libopenmpi3 openmpi-common libpmix2 | while read -r f; do
    if [ -f "$f" ] || [ -L "$f" ]; then mkdir -p "$root$(dirname "$f")" && cp -a "$f" "$root$f"; fi
  done
  cp -a /usr/bin/mpirun.openmpi "$root/usr/bin/mpirun.openmpi" 2>/dev/null || true
  { find "$root" -type f -name '*.so*' -o -type f -path '*/bin/*' | xargs ldd 2>/dev/null || true; } |
    awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
    grep -v -E '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' |
    { grep -v -E '^/usr/local/' || true; } | while read -r f; do
      local to=${f#/usr}  # /lib is /usr/lib on both machines: one folder, not a link replaced
      mkdir -p "$root/usr$(dirname "$to")" && cp -L "$f" "$root/usr$to"
    done
  tar cJf .gpu/mpi.tar.xz -C "$root" .
  rm -rf "$root"
  tar cJf .gpu/lib.tar.xz -C .gpu lib
  rm -rf .gpu/lib .gpu/mpi
  # Fashion-MNIST for `cinder train` and the MLP and CNN benchmarks (Debian's, as gzip files)
  cp -r /usr/share/datasets/fashion-mnist .gpu/
  # the GPT benchmark's text (Debian's fortunes)
  mkdir -p .gpu/fortunes && cp /usr/share/games/fortunes/science .gpu/fortunes/
  du -sh .gpu/*
  echo "the device tool carries at most 64 MiB with the working tree: $(du -sm .gpu | cut -f1) MiB here"
}

# ---- on the GPU machine -------------------------------------------------------------------------
budget=400
bench=""
tests=each
train=0
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }

# run NAME LIMIT CMD...: runs CMD under min(LIMIT, what is left), output to $out/NAME.log;
# prints and records a summary line
run_step() {
  local name=$1 limit=$2
  shift 2
  local l
  l=$(left)
  if [ "$l" -lt 20 ]; then echo "SKIP  $name (budget spent)" | tee -a "$out/summary.txt"; return 0; fi
  [ "$limit" -gt "$l" ] && limit=$l
  local t0 rc
  t0=$(date +%s)
  timeout -k 5 "$limit" "$@" > "$out/$name.log" 2>&1
  rc=$?
  local verdict=PASS
  case $rc in 0) ;; 77) verdict=SKIP ;; 124|137) verdict=TIMEOUT ;; *) verdict=FAIL ;; esac
  echo "$verdict $name rc=$rc $(( $(date +%s) - t0 ))s" | tee -a "$out/summary.txt"
  return 0
}

run() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --budget) budget=$2; shift 2 ;;
      --bench) bench=$2; shift 2 ;;
      --tests) tests=$2; shift 2 ;;
      --train) train=1; shift ;;
      *) echo "gpu-check.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
  done
  # the device tool brings back at most 8 files: the logs travel as one archive, made on exit
  dest=${OUT:-out/gpu}
  out=/tmp/gpu-check/logs
  mkdir -p "$dest" "$out"
  : > "$out/summary.txt"
  trap 'cp "$out/summary.txt" "$out/failures.txt" "$out/machine.log" "$dest/" 2>/dev/null;
        tar czf "$dest/logs.tgz" -C /tmp/gpu-check logs' EXIT
  {
    nvidia-smi -L; nvidia-smi --query-gpu=driver_version,memory.total --format=csv
    nvcc --version | tail -2; uname -a; head -2 /etc/os-release; nproc
  } > "$out/machine.log" 2>&1
  [ -d .gpu ] || { echo "gpu-check.sh: no .gpu/ (run 'scripts/gpu-check.sh pack' here and carry it)"; exit 2; }
  tar xJf .gpu/build.tar.xz
  mkdir -p /tmp/gpu-check && tar xJf .gpu/lib.tar.xz -C /tmp/gpu-check
  mkdir -p /tmp/gpu-check/mpiroot && tar xJf .gpu/mpi.tar.xz -C /tmp/gpu-check/mpiroot
  cp -an /tmp/gpu-check/mpiroot/. / 2>> "$out/machine.log"
  ldconfig 2>/dev/null || true
  if [ ! -e /usr/share/datasets/fashion-mnist ]; then
    mkdir -p /usr/share/datasets && ln -s "$PWD/.gpu/fashion-mnist" /usr/share/datasets/fashion-mnist
  fi
  if [ ! -e /usr/share/games/fortunes/science ]; then
    mkdir -p /usr/share/games/fortunes && cp .gpu/fortunes/science /usr/share/games/fortunes/
  fi

  # CUDA's libraries: the toolkit's, and cuDNN's and NCCL's from PyTorch's wheels
  local dirs="" f d
  for f in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcufft.so.12 libcudnn.so.9 libnccl.so.2; do
    d=$(find /usr/local /opt /usr/lib -name "$f" -print -quit 2>/dev/null)
    echo "$f: ${d:-not found}" >> "$out/machine.log"
    [ -n "$d" ] && case ":$dirs:" in *":$(dirname "$d"):"*) ;; *) dirs="$dirs:$(dirname "$d")" ;; esac
  done
  export LD_LIBRARY_PATH="$PWD/build/gpu:/tmp/gpu-check/lib${dirs}:${LD_LIBRARY_PATH:-}"
  export CINDER_BACKEND_PATH="$PWD/build/gpu"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >> "$out/machine.log"
  ldd build/gpu/libcinder_cuda.so build/gpu/libcinder_distributed.so >> "$out/machine.log" 2>&1

  local t=build/gpu/tests/test_cuda_ops names n
  names=$(grep -o 'RUN(test_[a-z0-9_]*)' tests/test_cuda_ops.c | sed 's/RUN(\(.*\))/\1/')
  if [ "$tests" != no ]; then
    for n in $names; do
      [ "$tests" = each ] || break
      # the last test counts the ops the others compared: it runs in the whole program alone
      [ "$n" = test_every_op_has_a_kernel_and_a_check ] && continue
      run_step "cuda_ops.$n" 120 env CINDER_TEST_ONLY="$n" "$t"
    done
    run_step cuda_ops_whole 180 "$t"
    run_step cuda_static_link 60 build/gpu/tests/cuda_static_link
    run_step extension_cuda 60 build/gpu/examples/extension/test_fused_linear_relu
    run_step dist_nccl 120 env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      OMPI_MCA_btl_vader_single_copy_mechanism=none /usr/bin/orterun -np 1 build/gpu/tests/test_dist_nccl
    # API errors are not counted: test_out_of_memory asks for more than the GPU has on purpose
    if command -v compute-sanitizer > /dev/null; then
      run_step cuda_ops_memcheck 150 compute-sanitizer --tool memcheck --report-api-errors no \
        --error-exitcode 9 "$t"
    fi
  fi
  if [ "$train" = 1 ]; then
    run_step train_mlp 120 build/gpu/cinder train --model mlp --epochs 2 --device cuda
    run_step train_cnn 180 build/gpu/cinder train --model cnn --epochs 2 --device cuda
  fi
  if [ -n "$bench" ]; then
    run_step bench 600 env BENCH_PYTHON=python3 BENCH_BUILD=build/gpu scripts/bench.sh --device cuda \
      --reps 1 --only "$bench" --out "$out/bench_raw.txt"
  fi
  # the failing tests' own lines, for the summary
  grep -H -E "^FAIL|FAILED|error|Error|leaked|want" "$out"/cuda_ops*.log "$out"/extension_cuda.log \
    "$out"/dist_nccl.log "$out"/train_*.log 2>/dev/null | grep -v "^[^:]*:epoch" | head -60 > "$out/failures.txt"
  echo "---- failures (first lines)"; head -40 "$out/failures.txt"
}

case "$mode" in
  pack) pack ;;
  run) run "$@" ;;
  *) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
esac
