#!/usr/bin/env bash
# Side-by-side benchmarks of cinder against PyTorch (docs/benchmarks.md).
#
#   scripts/bench.sh [--device cpu|cuda] [--reps N] [--threads N] [--only w1,w2,...] [--out FILE]
#
# Creates its own virtual environment (.venv-bench, git-ignored) with the current PyTorch from
# PyPI (a large download the first time), builds cinder Release in build-bench (build-bench-cuda
# for --device cuda, with the CUDA backend), then runs each workload's cinder program
# (bench/bench_*.c, or `cinder train` for the MLP) and its PyTorch twin (bench/torch/*.py) N times,
# alternating which goes first, so that both see the same machine. Prints a table of medians,
# their ratio and whether the bar is met; --out also writes the raw figures (one run per line).
#
# Workloads: overhead elementwise softmax matmul conv mlp. On a device that this build or machine
# lacks (--device cuda without a GPU), each program says so and the table shows "skipped".
#
# Both run with 2 threads (cinder: OMP_NUM_THREADS, PyTorch: torch.set_num_threads), or N with
# --threads N (--threads 1 compares the kernels alone, free of thread scheduling on a loaded
# machine). OPENBLAS_CORETYPE and
# OPENBLAS_L2_SIZE, which some machines set for old OpenBLAS builds, are unset for the benchmark
# commands only, so OpenBLAS picks its kernel for this CPU (the header names it).
set -euo pipefail
cd "$(dirname "$0")/.."

device=cpu
reps=5
threads=2
only=""
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device="$2"; shift 2 ;;
    --device=*) device="${1#*=}"; shift ;;
    --reps) reps="$2"; shift 2 ;;
    --reps=*) reps="${1#*=}"; shift ;;
    --threads) threads="$2"; shift 2 ;;
    --threads=*) threads="${1#*=}"; shift ;;
    --only) only="$2"; shift 2 ;;
    --only=*) only="${1#*=}"; shift ;;
    --out) out="$2"; shift 2 ;;
    --out=*) out="${1#*=}"; shift ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$device" in cpu|cuda|cuda:*) ;; *) echo "bench.sh: --device cpu or cuda" >&2; exit 2 ;; esac
[[ "$reps" =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: --reps takes a positive integer" >&2; exit 2; }
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: --threads takes a positive integer" >&2; exit 2; }
workloads=(overhead elementwise softmax matmul conv mlp)
if [ -n "$only" ]; then IFS=, read -r -a workloads <<< "$only"; fi

# ---- PyTorch, in a virtual environment of our own ---------------------------------------------
venv=.venv-bench
if ! "$venv/bin/python" -c "import torch, numpy" 2>/dev/null; then
  echo "bench.sh: installing PyTorch from PyPI into $venv (large download)..." >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q torch numpy
fi
py="$venv/bin/python"

# ---- cinder, Release ------------------------------------------------------------------------------
scripts/deps.sh
if [ "$device" = cpu ]; then
  build=build-bench
  cuda_opt=-DCINDER_CUDA=OFF
else
  build=build-bench-cuda
  cuda_opt=-DCINDER_CUDA=AUTO
fi
mkdir -p "$build"
log="$build/bench-build.log"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCINDER_TESTS=OFF "$cuda_opt" > "$log" 2>&1 ||
  { cat "$log" >&2; exit 1; }
cmake --build "$build" -j"$(nproc)" >> "$log" 2>&1 || { tail -50 "$log" >&2; exit 1; }

# ---- running ----------------------------------------------------------------------------------------
# Benchmark commands run without the OpenBLAS overrides (see the top of this file).
bench_env=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS="$threads" BENCH_THREADS="$threads")
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT

# cinder's figures for one workload, `name value unit` per line (or `skip ...`)
run_cinder() {
  case "$1" in
    overhead) "${bench_env[@]}" "$build/bench/bench_overhead" --device "$device" --iters 100000 ;;
    mlp)
      local log
      log=$("${bench_env[@]}" "$build/cinder" train --model mlp --epochs 1 --schedule constant --device "$device" 2>&1) ||
        { echo "$log" | grep -q -i "unknown device\|unavailable\|no gpu\|not compiled" &&
            { echo "skip mlp_epoch: $(echo "$log" | tail -1)"; return 0; }
          echo "$log" >&2; return 1; }
      echo "$log" | sed -n 's/^epoch 1\/1: .*test accuracy \([0-9.]*\), epoch time \([0-9.]*\) s$/mlp_epoch \2 s\nmlp_accuracy \1 fraction/p'
      ;;
    *) "${bench_env[@]}" "$build/bench/bench_$1" --device "$device" ;;
  esac
}

run_torch() {
  local args=(--device "$device")
  [ "$1" = overhead ] && args+=(--iters 100000)
  (cd bench/torch && "${bench_env[@]}" "../../$py" "$1.py" "${args[@]}")
}

# Appends `<impl> <rep> <line>` for each line a program printed; a skip (exit 77) is fine.
record() {
  local impl=$1 rep=$2 w=$3 rc=0 lines
  lines=$("run_$impl" "$w") || rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
    echo "bench.sh: $impl $w failed (exit $rc)" >&2
    exit 1
  fi
  while IFS= read -r line; do
    [ -n "$line" ] && echo "$impl $rep $line" >> "$raw"
  done <<< "$lines"
}

echo "bench.sh: $reps repetitions of: ${workloads[*]} (device $device, $threads threads); load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for r in $(seq 1 "$reps"); do
  for w in "${workloads[@]}"; do
    echo "  rep $r/$reps: $w" >&2
    if [ $((r % 2)) -eq 1 ]; then
      record cinder "$r" "$w"; record torch "$r" "$w"
    else
      record torch "$r" "$w"; record cinder "$r" "$w"
    fi
  done
done
[ -n "$out" ] && cp "$raw" "$out"

# ---- the table ----------------------------------------------------------------------------------
openblas=$(dpkg-query -W -f='${Version}' libopenblas0-pthread 2>/dev/null || echo unknown)
openblas_core=$("${bench_env[@]}" "$build/bench/bench_matmul" --info 2>/dev/null || echo unknown)
torch_version=$("$py" -c "import torch; print(torch.__version__)")
load=$(cut -d' ' -f1-3 /proc/loadavg)
"$py" - "$raw" "$device" "$reps" "$openblas" "$openblas_core" "$torch_version" "$threads" "$load" <<'EOF'
import collections, statistics, subprocess, sys

raw, device, reps, openblas, core, torch_version, threads, load = sys.argv[1:]
values = collections.defaultdict(list)   # (impl, figure) -> [value]
units, skipped = {}, {}
for line in open(raw):
    impl, rep, rest = line.rstrip("\n").split(" ", 2)
    if rest.startswith("skip "):
        name, why = rest[5:].split(":", 1)
        skipped[(impl, name)] = why.strip()
        continue
    name, value, unit = rest.split(" ", 2)
    values[(impl, name)].append(float(value))
    units[name] = unit

# figure, what it measures, lower is better?, absolute cap on cinder's figure, bar on the ratio
BARS = [
    ("add4", "per-op overhead, add of two 4-element f32", True, 100.0, 1 / 5),
    ("add4_autodiff", "the same, inputs require grad", True, 300.0, 1 / 3),
    ("backward_chain100", "backward of a 100-op chain", True, None, 1 / 3),
    ("add_16m", "elementwise add, 16M f32", False, None, 0.95),
    ("softmax_4096", "softmax over rows, 4096x4096 f32", False, None, 1.0),
    ("matmul_1024", "matmul 1024x1024x1024 f32", False, None, 0.95),
    ("conv2d_fwd_bwd", "conv2d fwd+bwd, 64x1x28x28 -> 32ch 3x3", True, None, 1.0),
    ("mlp_epoch", "MLP 784-256-128-10 epoch, batch 128, SGD", True, None, 0.67),
]

def med(impl, name):
    v = values.get((impl, name))
    return statistics.median(v) if v else None

def fmt(x):
    return "-" if x is None else f"{x:.4g}"

cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"],
                     capture_output=True, text=True).stdout.strip()
def sh(cmd):
    return subprocess.run(["sh", "-c", cmd], capture_output=True, text=True).stdout.strip()

memory = sh("free -g | awk '/^Mem:/ {print $2}'")
print(f"device {device}, {threads} threads; {cpu}, {sh('nproc')} cores, {memory} GiB; "
      f"OpenBLAS {openblas} ({core}); PyTorch {torch_version}; medians of {reps} runs; "
      f"load average at the end {load}")
print()
print("| workload | unit | cinder | PyTorch | cinder/PyTorch | bar | met |")
print("|---|---|---|---|---|---|---|")
shown = set()
for name, what, lower, cap, bar in BARS:
    shown.add(name)
    c, t = med("cinder", name), med("torch", name)
    unit = units.get(name, "")
    if c is None or t is None:
        why = skipped.get(("cinder", name)) or skipped.get(("torch", name)) or "not run"
        print(f"| {what} | {unit} | {fmt(c)} | {fmt(t)} | - | - | skipped: {why} |")
        continue
    ratio = c / t
    ok = ratio <= bar if lower else ratio >= bar
    text = f"{'<=' if lower else '>='} {bar:.3g}"
    if cap is not None:
        ok = ok and c <= cap
        text += f" and <= {cap:g} {unit}"
    if name == "mlp_epoch":
        ca, ta = med("cinder", "mlp_accuracy"), med("torch", "mlp_accuracy")
        shown.add("mlp_accuracy")
        if ca is not None and ta is not None:
            ok = ok and ca >= ta - 0.01
            text += f"; accuracy {ca:.4f} vs {ta:.4f} (>= -0.01)"
    print(f"| {what} | {unit} | {fmt(c)} | {fmt(t)} | {ratio:.3f} | {text} | {'yes' if ok else 'NO'} |")

others = sorted({n for (_, n) in values} - shown)
if others:
    print()
    print("Other figures (no bar):")
    print()
    print("| figure | unit | cinder | PyTorch |")
    print("|---|---|---|---|")
    for name in others:
        print(f"| {name} | {units[name]} | {fmt(med('cinder', name))} | {fmt(med('torch', name))} |")
EOF
