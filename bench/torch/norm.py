"""Twin of bench/bench_norm.c: issue 17's fused ops at its GPT's sizes, forward and backward.

  layer_norm_fwd_bwd  ms of F.layer_norm(x [32, 64, 128], (128,), weight, bias, 1e-5) and the
                      backward of sum(y * r) (gradients of x, weight and bias)
  gelu_fwd_bwd        ms of F.gelu(x [32, 64, 512]) and the backward of sum(y * r)
  gelu_tanh_fwd_bwd   the same with approximate="tanh"
"""
from common import emit, median, now, options, resolve_device, sync
import torch
import torch.nn.functional as F


def main():
    o = options(30)
    figures = ["layer_norm_fwd_bwd", "gelu_fwd_bwd", "gelu_tanh_fwd_bwd"]
    dev = resolve_device(o.device, figures)
    g = torch.Generator(device=dev).manual_seed(3)
    for which, name in enumerate(figures):
        shape = (32, 64, 128 if which == 0 else 512)
        x = torch.randn(*shape, generator=g, device=dev).requires_grad_(True)
        r = torch.randn(*shape, generator=g, device=dev)
        w = torch.ones(shape[-1], device=dev, requires_grad=True) if which == 0 else None
        b = torch.zeros(shape[-1], device=dev, requires_grad=True) if which == 0 else None

        def step():
            if which == 0:
                y = F.layer_norm(x, shape[-1:], w, b, 1e-5)
            else:
                y = F.gelu(x, approximate="tanh" if which == 2 else "none")
            (y * r).sum().backward()
            x.grad = None
            if w is not None:
                w.grad = b.grad = None

        step()
        sync(dev)
        times = []
        for _ in range(o.reps):
            t0 = now()
            step()
            sync(dev)
            times.append(now() - t0)
        emit(name, 1e3 * median(times), "ms")


if __name__ == "__main__":
    main()
