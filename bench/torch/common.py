"""What the PyTorch twins of cinder's benchmark programs share: options, timing, output.

Each twin (bench/torch/<workload>.py) mirrors one bench/bench_<workload>.c: the same sizes, the
same figure names, and the same format, one line per figure: `name value unit`. On a device
that is not available it prints `skip <name>: <reason>` lines and exits with SKIP (77).
PyTorch runs on 2 threads (the cores of the machine these bars were set on, and cinder's count
there), or on BENCH_THREADS when scripts/bench.sh --threads sets it."""
import argparse
import os
import statistics
import sys
import time

import torch

SKIP = 77
torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))


def options(default_reps, extra=None):
    """Parses --device and --reps (and what extra(parser) adds)."""
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    p.add_argument("--reps", type=int, default=default_reps)
    if extra:
        extra(p)
    return p.parse_args()


def resolve_device(name, figures):
    """torch.device(name), or skip lines and exit SKIP when it is not usable here."""
    if name.startswith("cuda") and not torch.cuda.is_available():
        for f in figures:
            print(f"skip {f}: torch.cuda.is_available() is False (no GPU or driver here)")
        sys.exit(SKIP)
    return torch.device(name)


def sync(device):
    """Waits for queued GPU work (kernels run asynchronously); nothing on the CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


now = time.perf_counter


def median(values):
    return statistics.median(values)


def emit(name, value, unit):
    print(f"{name} {value:.6g} {unit}", flush=True)
