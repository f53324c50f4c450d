"""Twin of bench/bench_matmul.c: matrix multiply 1024 x 1024 x 1024 f32.

  matmul_1024  GFLOP/s of torch.matmul(a, b) (2 n^3 flops), a new output each time
"""
from common import emit, median, now, options, resolve_device, sync
import torch

DIM = 1024


def main():
    o = options(9)
    dev = resolve_device(o.device, ["matmul_1024"])
    g = torch.Generator(device=dev).manual_seed(42)
    a = torch.rand(DIM, DIM, generator=g, device=dev) * 2 - 1
    b = torch.rand(DIM, DIM, generator=g, device=dev) * 2 - 1
    torch.matmul(a, b)
    sync(dev)
    times = []
    for _ in range(o.reps):
        t0 = now()
        c = torch.matmul(a, b)
        sync(dev)
        times.append(now() - t0)
        del c
    emit("matmul_1024", 2 * DIM**3 * 1e-9 / median(times), "GFLOP/s")


if __name__ == "__main__":
    main()
