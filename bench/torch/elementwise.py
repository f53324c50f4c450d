"""Twin of bench/bench_elementwise.c: elementwise throughput on 16M f32, a new output each op.

  add_16m         GB/s of torch.add(a, b) (3 * 64 MB moved)
  mul_scalar_16m  GB/s of torch.mul(a, 2.0) (2 * 64 MB)
  exp_16m         GB/s of torch.exp(a) (2 * 64 MB)
"""
from common import emit, median, now, options, resolve_device, sync
import torch

N = 16 * 1024 * 1024


def time_op(f, dev, reps):
    f()
    sync(dev)
    times = []
    for _ in range(reps):
        t0 = now()
        c = f()
        sync(dev)
        times.append(now() - t0)
        del c
    return median(times)


def main():
    o = options(15)
    dev = resolve_device(o.device, ["add_16m", "mul_scalar_16m", "exp_16m"])
    g = torch.Generator(device=dev).manual_seed(1)
    a = torch.rand(N, generator=g, device=dev) * 2 - 1
    b = torch.rand(N, generator=g, device=dev) * 2 - 1
    gb3, gb2 = 3 * N * 4 / 1e9, 2 * N * 4 / 1e9
    emit("add_16m", gb3 / time_op(lambda: torch.add(a, b), dev, o.reps), "GB/s")
    emit("mul_scalar_16m", gb2 / time_op(lambda: torch.mul(a, 2.0), dev, o.reps), "GB/s")
    emit("exp_16m", gb2 / time_op(lambda: torch.exp(a), dev, o.reps), "GB/s")


if __name__ == "__main__":
    main()
