"""Twin of bench/bench_conv.c: forward and backward of a 3x3 conv, 1 -> 32 channels, batch 64.

  conv2d_fwd_bwd  ms per y = conv2d(x, w, b, padding=1), sum(y).backward(), with x
                  [64, 1, 28, 28], w [32, 1, 3, 3], b [32] all requiring grad
"""
from common import emit, median, now, options, resolve_device, sync
import torch
import torch.nn.functional as F


def main():
    o = options(21)
    dev = resolve_device(o.device, ["conv2d_fwd_bwd"])
    g = torch.Generator(device=dev).manual_seed(3)
    x = torch.randn(64, 1, 28, 28, generator=g, device=dev).requires_grad_()
    w = ((torch.rand(32, 1, 3, 3, generator=g, device=dev) * 2 - 1) / 3).requires_grad_()
    b = ((torch.rand(32, generator=g, device=dev) * 2 - 1) / 3).requires_grad_()
    times = []
    for r in range(-2, o.reps):  # r < 0: warm-up
        t0 = now()
        F.conv2d(x, w, b, padding=1).sum().backward()
        sync(dev)
        t1 = now()
        x.grad = w.grad = b.grad = None
        if r >= 0:
            times.append((t1 - t0) * 1e3)
    emit("conv2d_fwd_bwd", median(times), "ms")


if __name__ == "__main__":
    main()
