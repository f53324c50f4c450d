"""Twin of bench/bench_elementwise.c: elementwise throughput, a new output each op.

  add_64k .. add_16m  GB/s of torch.add(a, b) on 64K, 256K, 1M, 4M and 16M f32 (3 * 4 * n bytes
                      moved); below 16M each timed sample is a loop of 16M / n adds
  mul_scalar_16m      GB/s of torch.mul(a, 2.0) (2 * 64 MB)
  exp_16m             GB/s of torch.exp(a) (2 * 64 MB)

The machine's bandwidth (memcpy_16m, stream_*_16m, triad_16m, bandwidth) is measured by the C
program only.
"""
from common import emit, median, now, options, resolve_device, sync
import torch

N = 16 * 1024 * 1024
SWEEP = [("add_64k", 64 * 1024), ("add_256k", 256 * 1024), ("add_1m", 1024 * 1024),
         ("add_4m", 4 * 1024 * 1024), ("add_16m", N)]


def time_op(f, dev, reps, iters=1):
    f()
    sync(dev)
    times = []
    for _ in range(reps):
        t0 = now()
        for _ in range(iters):
            c = f()
            del c
        sync(dev)
        times.append(now() - t0)
    return median(times)


def main():
    o = options(15)
    dev = resolve_device(o.device, [name for name, _ in SWEEP] + ["mul_scalar_16m", "exp_16m"])
    g = torch.Generator(device=dev).manual_seed(1)
    a = torch.rand(N, generator=g, device=dev) * 2 - 1
    b = torch.rand(N, generator=g, device=dev) * 2 - 1
    for name, k in SWEEP:
        ka = torch.rand(k, generator=g, device=dev) * 2 - 1
        kb = torch.rand(k, generator=g, device=dev) * 2 - 1
        iters = N // k
        secs = time_op(lambda: torch.add(ka, kb), dev, o.reps, iters)
        emit(name, 3 * k * 4 * iters / 1e9 / secs, "GB/s")
        del ka, kb
    gb2 = 2 * N * 4 / 1e9
    emit("mul_scalar_16m", gb2 / time_op(lambda: torch.mul(a, 2.0), dev, o.reps), "GB/s")
    emit("exp_16m", gb2 / time_op(lambda: torch.exp(a), dev, o.reps), "GB/s")


if __name__ == "__main__":
    main()
