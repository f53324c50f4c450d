#!/usr/bin/env bash
# Compares the per-op overhead and the MLP epoch of this tree with those of an earlier revision,
# in one run: both are built Release (the revision in a git worktree under build-compare/), then
# their programs alternate, N times each, so both see the same machine.
#
#   scripts/bench-compare.sh [REV] [--reps N] [--threads N]     (REV: default HEAD~1)
#
# Prints the median of each figure for both builds and their ratio (this tree / REV). Figures:
# add4, add4_autodiff, backward_chain100 (bench/bench_overhead.c) and mlp_epoch (`cinder train
# --model mlp --epochs 1`, which needs Fashion-MNIST: scripts/deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."

rev=HEAD~1
reps=5
threads=2
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) reps="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench-compare.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) rev="$1"; shift ;;
  esac
done
[[ "$reps" =~ ^[1-9][0-9]*$ ]] || { echo "bench-compare.sh: --reps takes a positive integer" >&2; exit 2; }
sha=$(git rev-parse --verify "$rev^{commit}") || { echo "bench-compare.sh: no revision '$rev'" >&2; exit 2; }

build_release() { # source dir, build dir
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release -DCINDER_TESTS=OFF -DCINDER_CUDA=OFF \
    > "$2.log" 2>&1 && cmake --build "$2" -j"$(nproc)" >> "$2.log" 2>&1 ||
    { tail -40 "$2.log" >&2; exit 1; }
}
mkdir -p build-compare
old_src=build-compare/src-${sha:0:12}
if [ ! -d "$old_src" ]; then
  git worktree add --detach "$old_src" "$sha" > /dev/null
fi
build_release "$old_src" build-compare/old
build_release . build-compare/new

env_run=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS="$threads")
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
figures() { # build dir: `name value` lines
  "${env_run[@]}" "$1/bench/bench_overhead" --iters 100000 | awk '{print $1, $2}'
  "${env_run[@]}" "$1/cinder" train --model mlp --epochs 1 --schedule constant 2>/dev/null |
    sed -n 's/^epoch 1\/1: .*epoch time \([0-9.]*\) s$/mlp_epoch \1/p'
}
echo "bench-compare.sh: $reps repetitions, this tree against ${sha:0:12}; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for r in $(seq 1 "$reps"); do
  echo "  rep $r/$reps" >&2
  if [ $((r % 2)) -eq 1 ]; then order="old new"; else order="new old"; fi
  for which in $order; do
    figures "build-compare/$which" | sed "s/^/$which /" >> "$raw"
  done
done
python3 - "$raw" "${sha:0:12}" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import collections, statistics, sys
raw, rev, load = sys.argv[1:]
v = collections.defaultdict(list)
for line in open(raw):
    which, name, value = line.split()
    v[(which, name)].append(float(value))
print(f"this tree against {rev}; medians; load average at the end {load}")
print("| figure | before | after | after/before |")
print("|---|---|---|---|")
for name in ["add4", "add4_autodiff", "backward_chain100", "mlp_epoch"]:
    o, n = v.get(("old", name)), v.get(("new", name))
    if not o or not n:
        print(f"| {name} | - | - | not measured |")
        continue
    mo, mn = statistics.median(o), statistics.median(n)
    print(f"| {name} | {mo:.4g} | {mn:.4g} | {mn / mo:.3f} |")
PY
