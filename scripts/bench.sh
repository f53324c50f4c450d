#!/usr/bin/env bash
# Side-by-side benchmarks of cinder against PyTorch (docs/benchmarks.md).
#
#   scripts/bench.sh [--device cpu|cuda] [--reps N] [--threads N] [--only w1,w2,...] [--out FILE]
#
# Creates its own virtual environment (.venv-bench, git-ignored) with the current PyTorch from
# PyPI (a large download the first time), builds cinder Release in build-bench (build-bench-cuda
# for --device cuda, with the CUDA backend), then runs each workload's cinder program
# (bench/bench_*.c, or `cinder train` for the MLP and the CNN) and its PyTorch twin
# (bench/torch/*.py) N times, alternating which goes first, so that both see the same machine.
# Prints a table of medians, their ratio, the median of each repetition's own ratio (the two runs
# of a repetition seconds apart: the figure held against the bar, as this host's speed moves by up
# to 2x over minutes) and whether the bar is met; --out also writes the raw figures (one run per
# line).
#
# Workloads: overhead elementwise softmax matmul conv mlp cnn gpt quant, and ddp (cinder alone, not in
# the default list: data parallelism over MPI, issue 18). On a device that this build or
# machine lacks (--device cuda without a GPU), each program says so and the table shows "skipped".
# mlp and cnn train two epochs on each side: the second is the epoch held against the bars; the
# first, shown without a bar as *_first_epoch, also holds each library's one-time start (oneDNN
# generates its GEMM kernels in its first call: 35-47 ms here, a tenth of the MLP's epoch).
# cnn is `cinder train --model cnn` against bench/torch/cnn.py: 30 and 50 s per run at 2 threads,
# so most of a full run. gpt is bench/bench_gpt.c against bench/torch/gpt.py:
# nanoGPT's GPT (4 layers, n_embd 128, 4 heads, block 64, batch 32, AdamW) on the science fortunes,
# step time and tokens/s for training and forward-only, the final loss and the peak RSS, both
# sides from the same initial weights (written once per run by gpt.py --write-weights).
#
# A second table sets cinder's figures against this machine's limits, measured in the same run:
# the MLP's and the CNN's epoch against their GEMM floor (the epoch's GEMM flops at the sgemm_1024
# rate of matmul; and, the fraction held against the bar, at the better of two sgemm samples taken
# just before and just after each of their own runs: mlp_sgemm, cnn_sgemm, on CPU), add_16m and
# softmax_4096 against the memory bandwidth that elementwise measures
# (and, the fraction held against the bar, against a bandwidth sample taken by their own program
# just before each of their runs: add_16m_bw, softmax_4096_bw; bench/bench_ceiling.h),
# and the peak RSS of `cinder train --model mlp` against the data set's f32 size + 100 MB. A row
# whose figures come from a workload left out by --only says which to add.
#
# ddp times one epoch of `cinder train` for the CNN (12,800 images) and the MLP (60,000), 1
# process x 1 thread against `mpirun -np 2 --bind-to none` processes x 1 thread with --ddp (Open
# MPI; as root, its allow-run-as-root variables are set for that command only), and against two
# independent processes at once (no MPI; each half the images, batch 64, the slower one's time):
# the machine's own ceiling for two processes. The time is the epoch time that cinder prints
# (training plus evaluation, process start-up and data loading excluded) for the second of two
# epochs, as for mlp and cnn. The three run in
# alternating order, once per repetition, and the table gives each model's scaling efficiency
# T(1 x 1) / (2 T(2 x 1)) three ways: the ratio of the medians, the median of the repetitions'
# own ratios (the two runs of a pair a few seconds apart, so they see the same machine: the
# figure held against the bar of 0.9 for the CNN), and the ratio of the fastest runs; and the
# ceiling T(1 x 1) / (2 T(2 independent)). Use --reps 9 or more on a shared machine.
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
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$device" in cpu|cuda|cuda:*) ;; *) echo "bench.sh: --device cpu or cuda" >&2; exit 2 ;; esac
[[ "$reps" =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: --reps takes a positive integer" >&2; exit 2; }
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: --threads takes a positive integer" >&2; exit 2; }
workloads=(overhead elementwise softmax matmul conv mlp cnn gpt quant)
if [ -n "$only" ]; then IFS=, read -r -a workloads <<< "$only"; fi

# ---- PyTorch, in a virtual environment of our own ---------------------------------------------
# BENCH_PYTHON names a Python that already has torch, numpy and safetensors (a machine that
# cannot reach PyPI: scripts/gpu-check.sh)
if [ -n "${BENCH_PYTHON:-}" ]; then
  py=$(command -v "$BENCH_PYTHON")
else
  venv=.venv-bench
  if ! "$venv/bin/python" -c "import torch, numpy, safetensors" 2>/dev/null; then
    echo "bench.sh: installing PyTorch from PyPI into $venv (large download)..." >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip
    "$venv/bin/pip" install -q torch numpy safetensors  # safetensors: the GPT's shared weights
  fi
  py="$PWD/$venv/bin/python"
fi

# ---- cinder, Release ------------------------------------------------------------------------------
# BENCH_BUILD names a build made elsewhere (scripts/gpu-check.sh carries one to a GPU machine)
if [ -n "${BENCH_BUILD:-}" ]; then
  build=$BENCH_BUILD
else
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
fi

# ---- running ----------------------------------------------------------------------------------------
# Benchmark commands run without the OpenBLAS overrides (see the top of this file).
bench_env=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS="$threads" BENCH_THREADS="$threads")
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT

# oneDNN's sgemm rate on this run's threads now (16 calls of 1024^3, ~0.2 s), on CPU: the
# machine's speed moves by up to 2x from one minute to the next here, so an epoch is set against
# the rate of its own minute
sgemm_sample() {
  [ "$device" = cpu ] || return 0
  "${bench_env[@]}" "$build/bench/bench_matmul" --sgemm-only --reps 15 | awk '$1 == "sgemm_1024" { print $2 }'
}

# cinder's figures for one workload, `name value unit` per line (or `skip ...`)
run_cinder() {
  case "$1" in
    overhead) "${bench_env[@]}" "$build/bench/bench_overhead" --device "$device" --iters 100000 ;;
    mlp|cnn)
      # two epochs of `cinder train`, under bench/peak_rss.py for the process's peak RSS: the
      # second is the epoch held against the bars, the first (with the libraries' one-time start
      # inside its first step: oneDNN's JIT, ~40 ms) is shown beside it
      local log before after
      before=$(sgemm_sample)
      log=$("${bench_env[@]}" "$py" bench/peak_rss.py "$1_peak_rss" \
              "$build/cinder" train --model "$1" --epochs 2 --schedule constant --device "$device" 2>&1) ||
        { echo "$log" | grep -q -i "unknown device\|unavailable\|no gpu\|not compiled" &&
            { echo "skip $1_epoch: $(echo "$log" | grep -v "_peak_rss " | tail -1)"; return 0; }
          echo "$log" >&2; return 1; }
      after=$(sgemm_sample)
      [ -n "$before$after" ] && awk -v a="${before:-0}" -v b="${after:-0}" -v m="$1" \
        'BEGIN { printf "%s_sgemm %s GFLOP/s\n", m, (a > b ? a : b) }'
      echo "$log" | sed -n "s/^epoch 1\/2: .*epoch time \([0-9.]*\) s$/$1_first_epoch \1 s/p"
      echo "$log" | sed -n "s/^epoch 2\/2: .*test accuracy \([0-9.]*\), epoch time \([0-9.]*\) s$/$1_epoch \2 s\n$1_accuracy \1 fraction/p"
      echo "$log" | grep "^$1_peak_rss " || true
      ;;
    gpt)
      "${bench_env[@]}" "$py" bench/peak_rss.py gpt_peak_rss \
        "$build/bench/bench_gpt" --device "$device" --weights "$gpt_weights" ;;
    ddp)
      [ "$device" = cpu ] || { echo "skip ddp_cnn_1x1: the MPI engine runs on the CPU"; return 0; }
      command -v mpirun > /dev/null || { echo "skip ddp_cnn_1x1: no mpirun (scripts/deps.sh)"; return 0; }
      local root_env=() m limit t1 t2 ti order c
      [ "$(id -u)" -eq 0 ] && root_env=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
      # the epoch times that cinder prints (training plus evaluation, start-up excluded) of both
      # epochs, "first second": the second is the figure; the first also holds the one-time start
      # of the libraries (oneDNN's kernels generated, MPI's connections made) in its first steps
      epoch_time() { sed -n 's/^epoch [12]\/2: .*epoch time \([0-9.]*\) s$/\1/p' | paste -sd' '; }
      # one run of each configuration, in an order that alternates from one repetition to the next
      order="one ddp ind"
      [ $((r % 2)) -eq 0 ] && order="ind ddp one"
      for m in cnn mlp; do
        limit=$([ "$m" = cnn ] && echo 12800 || echo 60000)
        local args=(train --model "$m" --epochs 2 --test-limit 1000 --threads 1 --schedule constant)
        t1="" t2="" ti=""
        for c in $order; do
          case $c in
            one) t1=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$build/cinder" "${args[@]}" \
                        --limit "$limit" 2>/dev/null | epoch_time) ;;
            ddp) t2=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "${root_env[@]}" \
                        mpirun -np 2 --oversubscribe --bind-to none "$build/cinder" "${args[@]}" \
                        --limit "$limit" --ddp 2>/dev/null | epoch_time) ;;
            ind) # two processes that share nothing: half the images and half the batch each
                 ti=$( (for k in 0 1; do
                          env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$build/cinder" \
                            "${args[@]}" --limit $((limit / 2)) --test-limit 500 --batch 64 \
                            --seed $((42 + k)) 2>/dev/null | epoch_time &
                        done; wait) | awk '{ if ($1 > f) f = $1; if ($2 > s) s = $2 }
                                           END { if (s) print f, s }') ;;
          esac
        done
        [ "$(wc -w <<< "$t1 $t2 $ti")" -eq 6 ] ||
          { echo "bench.sh: ddp $m did not run" >&2; return 1; }
        echo "ddp_${m}_1x1 ${t1#* } s"
        echo "ddp_${m}_2x1 ${t2#* } s"
        echo "ddp_${m}_2ind ${ti#* } s"
        echo "ddp_${m}_1x1_first_epoch ${t1% *} s"
        echo "ddp_${m}_2x1_first_epoch ${t2% *} s"
        awk -v a="${t1#* }" -v b="${t2#* }" -v c="${ti#* }" -v a1="${t1% *}" -v b1="${t2% *}" -v m="$m" \
          'BEGIN { printf "ddp_%s_eff %.4f fraction\nddp_%s_ceiling %.4f fraction\n", m, a / (2 * b), m, a / (2 * c)
                   printf "ddp_%s_eff_first_epoch %.4f fraction\n", m, a1 / (2 * b1) }'
      done ;;
    *) "${bench_env[@]}" "$build/bench/bench_$1" --device "$device" ;;
  esac
}

run_torch() {
  [ "$1" = ddp ] && return 0 # cinder's own: no PyTorch twin (DDP over NCCL/gloo is another run)
  local args=(--device "$device")
  [ "$1" = overhead ] && args+=(--iters 100000)
  [ "$1" = gpt ] && args+=(--weights "$gpt_weights")
  local wrap=()
  case "$1" in mlp|cnn|gpt) wrap=("$py" ../peak_rss.py "$1_peak_rss") ;; esac
  (cd bench/torch && "${bench_env[@]}" "${wrap[@]}" "$py" "$1.py" "${args[@]}")
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
    [ -z "$line" ] || echo "$impl $rep $line" >> "$raw"
  done <<< "$lines"
}

# the GPT's initial weights, shared by both sides (nanoGPT's init, seed 0)
gpt_weights="$(cd "$build" && pwd)/gpt_init.safetensors"
case " ${workloads[*]} " in
  *" gpt "*) (cd bench/torch && "$py" gpt.py --write-weights "$gpt_weights") ;;
esac

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
openblas=$(dpkg-query -W -f='onednn ${Version}' libdnnl2 2>/dev/null || echo unknown)
openblas_core=$("${bench_env[@]}" "$build/bench/bench_matmul" --info 2>/dev/null || echo unknown)
torch_version=$("$py" -c "import torch; print(torch.__version__)")
load=$(cut -d' ' -f1-3 /proc/loadavg)
"$py" - "$raw" "$device" "$reps" "$openblas" "$openblas_core" "$torch_version" "$threads" "$load" <<'EOF'
import collections, statistics, subprocess, sys

raw, device, reps, openblas, core, torch_version, threads, load = sys.argv[1:]
values = collections.defaultdict(list)   # (impl, figure) -> [value]
byrep = collections.defaultdict(dict)    # (impl, figure) -> {repetition: value}
units, skipped = {}, {}
for line in open(raw):
    impl, rep, rest = line.rstrip("\n").split(" ", 2)
    if rest.startswith("skip "):
        name, why = rest[5:].split(":", 1)
        skipped[(impl, name)] = why.strip()
        continue
    name, value, unit = rest.split(" ", 2)
    values[(impl, name)].append(float(value))
    byrep[(impl, name)][rep] = float(value)
    units[name] = unit

# figure, what it measures, lower is better?, absolute cap on cinder's figure, bar on the ratio
BARS = [
    ("add4", "per-op overhead, add of two 4-element f32", True, 100.0, 1 / 5),
    ("add4_autodiff", "the same, inputs require grad", True, 300.0, 1 / 3),
    ("backward_chain100", "backward of a 100-op chain", True, None, 1 / 3),
    ("add_64k", "elementwise add, 64K f32", False, None, 1.0),
    ("add_256k", "elementwise add, 256K f32", False, None, 1.0),
    ("add_1m", "elementwise add, 1M f32", False, None, 1.0),
    ("add_4m", "elementwise add, 4M f32", False, None, 1.0),
    ("add_16m", "elementwise add, 16M f32", False, None, 1.0),
    ("softmax_4096", "softmax over rows, 4096x4096 f32", False, None, 1.0),
    ("matmul_1024", "matmul 1024x1024x1024 f32", False, None, 0.95),
    ("conv2d_fwd_bwd", "conv2d fwd+bwd, 64x1x28x28 -> 32ch 3x3", True, None, 1.0),
    ("mlp_epoch", "MLP 784-256-128-10 epoch, batch 128, SGD", True, None, 0.67),
    ("cnn_epoch", "CNN (2 conv + 2 FC) epoch, batch 128, SGD", True, None, 0.7),
    ("gpt_train_step", "GPT train step (4x128, 4 heads, batch 32x64, AdamW)", True, None, 0.8),
    ("gpt_forward", "GPT forward only (the same model and batch)", True, None, 0.8),
    ("quant_q8_b64", "int8 linear 4096x4096, batch 64 (PyTorch: dynamic quantized Linear)", True,
     None, 1.0),
]

# ---- the machine's limits -----------------------------------------------------------------------
# The GEMM floor of an epoch: its GEMM flops at the sgemm_1024 rate (oneDNN's own threads, as
# many as the run's). Each model's GEMMs for one image's forward pass as (M, K, N), 2 M K N flops:
# a convolution is [C_out, C_in kh kw] x [C_in kh kw, H_out W_out] (im2col), a linear layer
# [1, in] x [in, out]. Training an image costs the forward, the weight gradient (as many flops)
# and the input gradient (as many again), except the first layer's input gradient: the images
# need none. The test set is forward only.
TRAIN_IMAGES, TEST_IMAGES, PIXELS = 60000, 10000, 784
GEMMS = {
    "mlp": [(1, 784, 256), (1, 256, 128), (1, 128, 10)],
    "cnn": [(32, 1 * 9, 28 * 28), (64, 32 * 9, 14 * 14), (1, 64 * 7 * 7, 128), (1, 128, 10)],
}

def epoch_gflop(model):
    gemms = GEMMS[model]
    forward = sum(2 * m * k * n for m, k, n in gemms)
    first = 2 * gemms[0][0] * gemms[0][1] * gemms[0][2]
    return (TRAIN_IMAGES * (3 * forward - first) + TEST_IMAGES * forward) / 1e9

# Peak RSS of `cinder train --model mlp`: at most the data set in f32 plus 100 MB (MB = 10^6 B)
DATA_MB = (TRAIN_IMAGES + TEST_IMAGES) * PIXELS * 4 / 1e6
RSS_LIMIT_MB = DATA_MB + 100

def med(impl, name):
    v = values.get((impl, name))
    return statistics.median(v) if v else None

# The median of each repetition's own cinder/PyTorch ratio (f(cinder, torch) per repetition): the
# two runs of a repetition are seconds apart, so they see the same machine, whose speed moves by
# up to 2x over minutes here. The figure held against the bars; the ratio of the medians beside it.
# ref: PyTorch's figure to pair with, when its name differs.
def paired(name, ref=None, f=lambda c, t: c / t):
    c, t = byrep.get(("cinder", name), {}), byrep.get(("torch", ref or name), {})
    r = [f(c[k], t[k]) for k in c if k in t]
    return statistics.median(r) if r else None

def fmt(x):
    return "-" if x is None else f"{x:.4g}"

cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"],
                     capture_output=True, text=True).stdout.strip()
def sh(cmd):
    return subprocess.run(["sh", "-c", cmd], capture_output=True, text=True).stdout.strip()

memory = sh("free -g | awk '/^Mem:/ {print $2}'")
print(f"device {device}, {threads} threads; {cpu}, {sh('nproc')} cores, {memory} GiB; "
      f"GEMM: {core} (Debian {openblas}); PyTorch {torch_version}; medians of {reps} runs; "
      f"load average at the end {load}")
print()
print("| workload | unit | cinder | PyTorch | cinder/PyTorch, ratio of medians | "
      "median of paired ratios | bar (on the paired ratio) | met |")
print("|---|---|---|---|---|---|---|---|")
shown = set()
for name, what, lower, cap, bar in BARS:
    shown.add(name)
    c, t = med("cinder", name), med("torch", name)
    unit = units.get(name, "")
    if c is None or t is None:
        why = skipped.get(("cinder", name)) or skipped.get(("torch", name)) or "not run"
        print(f"| {what} | {unit} | {fmt(c)} | {fmt(t)} | - | - | - | skipped: {why} |")
        continue
    ratio = c / t
    pr = paired(name) or ratio  # no repetition with both: the ratio of the medians
    ok = pr <= bar if lower else pr >= bar
    text = f"{'<=' if lower else '>='} {bar:.3g}"
    if cap is not None:
        ok = ok and c <= cap
        text += f" and <= {cap:g} {unit}"
    if name.endswith("_epoch"):
        acc = name[:-len("_epoch")] + "_accuracy"
        ca, ta = med("cinder", acc), med("torch", acc)
        shown.add(acc)
        if ca is not None and ta is not None:
            ok = ok and ca >= ta - 0.01
            text += f"; accuracy {ca:.4f} vs {ta:.4f} (>= -0.01)"
    if name == "gpt_train_step":  # the same weights and batches: the same loss
        cl, tl = med("cinder", "gpt_final_loss"), med("torch", "gpt_final_loss")
        shown.add("gpt_final_loss")
        if cl is not None and tl is not None:
            ok = ok and abs(cl - tl) <= 1e-3
            text += f"; final loss {cl:.5f} vs {tl:.5f} (within 1e-3)"
    print(f"| {what} | {unit} | {fmt(c)} | {fmt(t)} | {ratio:.3f} | {pr:.3f} | {text} | "
          f"{'yes' if ok else 'NO'} |")

# Against this machine's limits, measured in this run. A row: figure, what, the workload that
# makes it, the limit's value (None when not measured), the workload that measures the limit,
# fraction(value, limit), the bar on cinder's fraction, whether the fraction must stay below it.
# add_16m and softmax_4096 also come as fractions measured together with the bandwidth
# (figure_bw: each run over a bandwidth sample taken just before it, bench/bench_ceiling.h): that
# fraction is held against the bar, the run-wide one shown beside it. So do the epochs against the
# sgemm rate sampled around each of their runs (m_sgemm): the median of the repetitions' fractions.
def floor_paired(m):
    e, s = byrep.get(("cinder", f"{m}_epoch"), {}), byrep.get(("cinder", f"{m}_sgemm"), {})
    r = [epoch_gflop(m) / s[k] / e[k] for k in e if s.get(k) and e[k] > 0]
    return statistics.median(r) if r else None

peak = med("cinder", "sgemm_1024")
bandwidth = med("cinder", "bandwidth")
def floor_at(m):  # without matmul in the run, at the median of the epoch's own samples
    rate = peak or med("cinder", f"{m}_sgemm")
    return epoch_gflop(m) / rate if rate else None

floor = {m: floor_at(m) for m in GEMMS}
LIMITS = [
    ("mlp_epoch", f"MLP epoch: GEMM floor ({epoch_gflop('mlp'):.4g} GFLOP at sgemm_1024) / time",
     "mlp", floor["mlp"], "matmul", lambda v, lim: lim / v, 0.7, False),
    ("cnn_epoch", f"CNN epoch: GEMM floor ({epoch_gflop('cnn'):.4g} GFLOP at sgemm_1024) / time",
     "cnn", floor["cnn"], "matmul", lambda v, lim: lim / v, 0.5, False),
    ("add_16m", "add 16M f32 / memory bandwidth", "elementwise", bandwidth, "elementwise",
     lambda v, lim: v / lim, 0.8, False),
    ("softmax_4096", "softmax 4096x4096 / memory bandwidth", "softmax", bandwidth, "elementwise",
     lambda v, lim: v / lim, 0.6, False),
    ("mlp_peak_rss", f"peak RSS of train --model mlp / (data f32 {DATA_MB:.4g} MB + 100 MB)", "mlp",
     RSS_LIMIT_MB, None, lambda v, lim: v / lim, 1.0, True),
]
print()
print("Against this machine's limits, measured in the same run: "
      f"sgemm_1024 {fmt(peak)} GFLOP/s (oneDNN's sgemm on {threads} threads, from matmul); memory "
      f"bandwidth {fmt(bandwidth)} GB/s (the best of memcpy and STREAM copy/add/triad, from "
      "elementwise). Fraction: limit / time for an epoch, figure / limit otherwise.")
print()
print("| figure | unit | cinder | PyTorch | limit | cinder's fraction | cinder's, paired with "
      "its limit's sample | PyTorch's fraction | bar | met |")
print("|---|---|---|---|---|---|---|---|---|---|")
for name, what, source, limit, limit_source, fraction, bar, below in LIMITS:
    shown.add(name)
    c, t = med("cinder", name), med("torch", name)
    unit = units.get(name, "")
    need = []
    if c is None:
        need.append(source)
    if limit is None and limit_source not in need:
        need.append(limit_source)
    if need:
        why = skipped.get(("cinder", name)) or ("needs " + " and ".join(need) + " in the run")
        print(f"| {what} | {unit} | {fmt(c)} | {fmt(t)} | {fmt(limit)} | - | - | - | - | "
              f"skipped: {why} |")
        continue
    fc = fraction(c, limit)
    ft = fraction(t, limit) if t is not None else None
    m = name[:-len("_epoch")] if name.endswith("_epoch") else None
    fp = floor_paired(m) if m else med("cinder", name + "_bw")
    shown.add(f"{m}_sgemm" if m else name + "_bw")
    held = fp if fp is not None else fc
    ok = held <= bar if below else held >= bar
    print(f"| {what} | {unit} | {fmt(c)} | {fmt(t)} | {fmt(limit)} | {fc:.3f} | {fmt(fp)} | "
          f"{fmt(ft)} | {'<=' if below else '>='} {bar:g}{' (paired)' if fp is not None else ''} | "
          f"{'yes' if ok else 'NO'} |")

# Quantized linear (issue 19), 4096 x 4096: batch 1 at least 3x cinder's f32 linear and at least
# 0.7 of the memory bandwidth (packed weights and scales read / time), batch 64 at least as fast
# as PyTorch's dynamically quantized Linear (int8, fbgemm; the one PyTorch figure both schemes
# are held against). A row: what, cinder's figure, its reference, fraction(figure, reference), bar.
if any(med("cinder", f"quant_{s}_b1") is not None for s in ("q8", "q4")):
    f32_b1, torch_b64 = med("cinder", "quant_f32_b1"), med("torch", "quant_q8_b64")
    def ratio(a, b):
        return a / b if a is not None and b else None
    QUANT = []  # what, unit, cinder's figure, its reference, the fraction held, bar
    for s, label in (("q8", "q8_block"), ("q4", "q4_block")):
        b1, gbs, b64 = (med("cinder", f"quant_{s}_{k}") for k in ("b1", "b1_gbs", "b64"))
        QUANT += [
            (f"{label}, batch 1: cinder's f32 linear / {label}", "ms", b1, f32_b1,
             ratio(f32_b1, b1), 3.0),
            (f"{label}, batch 1: GB/s of weights and scales / memory bandwidth", "GB/s", gbs,
             bandwidth, ratio(gbs, bandwidth), 0.7),
            (f"{label}, batch 64: PyTorch's dynamic int8 Linear / {label}, the median of paired "
             f"ratios (the ratio of the medians: {fmt(ratio(torch_b64, b64))})", "ms", b64,
             torch_b64, paired(f"quant_{s}_b64", "quant_q8_b64", lambda c, t: t / c), 1.0),
        ]
    print()
    print("Quantized linear, 4096 x 4096 (issue 19): each scheme against cinder's f32 linear "
          "(quant_f32_b1), the memory bandwidth (elementwise) and PyTorch's dynamically "
          "quantized Linear at batch 64, in the same run.")
    print()
    print("| figure | unit | cinder | reference | fraction | bar | met |")
    print("|---|---|---|---|---|---|---|")
    for what, unit, v, ref, fr, bar in QUANT:
        if fr is None:
            print(f"| {what} | {unit} | {fmt(v)} | {fmt(ref)} | - | >= {bar:g} | skipped: needs "
                  "quant and elementwise in the run |")
            continue
        print(f"| {what} | {unit} | {fmt(v)} | {fmt(ref)} | {fr:.3f} | >= {bar:g} | "
              f"{'yes' if fr >= bar else 'NO'} |")

# Data parallelism (issue 18): one process x 1 thread against 2 processes x 1 thread.
def best(impl, name):
    v = values.get((impl, name))
    return min(v) if v else None

ddp = [(m, med("cinder", f"ddp_{m}_1x1"), med("cinder", f"ddp_{m}_2x1")) for m in ("cnn", "mlp")]
if any(t1 is not None for _, t1, _ in ddp):
    print()
    print("Data parallelism: the second of two epochs (cinder's epoch time: training and "
          "evaluation), 1 process x 1 thread against 2 processes x 1 thread (mpirun -np 2 --bind-to none, --ddp) and "
          "against 2 independent processes (each half the images, batch 64); scaling efficiency "
          "T(1x1) / (2 T(2x1)) as the ratio of the medians, the median of each repetition's own "
          "ratio (held against the bar) and the ratio of the fastest runs; ceiling: "
          "T(1x1) / (2 T(2 independent)), the median of the repetitions' ratios.")
    print()
    print("| model | 1 x 1, s | 2 x 1, s | 2 independent, s | efficiency, ratio of medians | "
          "median of paired ratios (min-max) | fastest runs | ceiling | bar | met |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for m, t1, t2 in ddp:
        names = [f"ddp_{m}_{k}" for k in ("1x1", "2x1", "2ind", "eff", "ceiling")]
        shown.update(names)
        if t1 is None or t2 is None:
            continue
        pairs = values.get(("cinder", f"ddp_{m}_eff"), [])
        paired = statistics.median(pairs) if pairs else None
        spread = f" ({min(pairs):.3f}-{max(pairs):.3f})" if pairs else ""
        fastest = best("cinder", f"ddp_{m}_1x1") / (2 * best("cinder", f"ddp_{m}_2x1"))
        bar = ">= 0.9" if m == "cnn" else "-"
        met = ("yes" if paired is not None and paired >= 0.9 else "NO") if m == "cnn" else "-"
        print(f"| {m} | {t1:.4g} | {t2:.4g} | {fmt(med('cinder', f'ddp_{m}_2ind'))} | "
              f"{t1 / (2 * t2):.3f} | {fmt(paired)}{spread} | {fastest:.3f} | "
              f"{fmt(med('cinder', f'ddp_{m}_ceiling'))} | {bar} | {met} |")

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
