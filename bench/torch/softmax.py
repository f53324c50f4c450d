"""Twin of bench/bench_softmax.c: softmax over the rows of a 4096 x 4096 f32 matrix.

  softmax_4096  GB/s of torch.softmax(x, 1) (2 * 64 MB moved), a new output each time
"""
from common import emit, median, now, options, resolve_device, sync
import torch


def main():
    o = options(15)
    dev = resolve_device(o.device, ["softmax_4096"])
    g = torch.Generator(device=dev).manual_seed(2)
    x = torch.randn(4096, 4096, generator=g, device=dev)
    torch.softmax(x, 1)
    sync(dev)
    times = []
    for _ in range(o.reps):
        t0 = now()
        y = torch.softmax(x, 1)
        sync(dev)
        times.append(now() - t0)
        del y
    emit("softmax_4096", 2 * 4096 * 4096 * 4 / 1e9 / median(times), "GB/s")


if __name__ == "__main__":
    main()
