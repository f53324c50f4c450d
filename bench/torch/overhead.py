"""Twin of bench/bench_overhead.c: per-op overhead of PyTorch's eager mode from Python.

  add4           ns per torch.add of two 4-element f32 tensors (result dropped each time)
  add4_autodiff  the same with both inputs requiring grad (each add records a graph node)
  backward_chain100  us per backward of sum(chain of 100 alternating add/mul with x), x [4]
"""
from common import emit, median, now, options, resolve_device, sync
import torch


def add_ns(dev, track, iters, reps):
    a = torch.tensor([1.0, 2.0, 3.0, 4.0], device=dev, requires_grad=track)
    b = torch.tensor([1.0, 2.0, 3.0, 4.0], device=dev, requires_grad=track)
    add = torch.add
    add(a, b)
    times = []
    for _ in range(reps):
        t0 = now()
        for _ in range(iters):
            add(a, b)
        sync(dev)
        times.append((now() - t0) / iters * 1e9)
    return median(times)


def chain_backward_us(dev, iters, reps):
    x = torch.tensor([0.1, 0.2, 0.3, 0.4], device=dev, requires_grad=True)
    times = []
    for _ in range(reps):
        total = 0.0
        for _ in range(iters):
            y = x
            for k in range(100):
                y = y * x if k % 2 else y + x
            loss = y.sum()
            sync(dev)
            t0 = now()
            loss.backward()
            sync(dev)
            total += now() - t0
            x.grad = None
        times.append(total / iters * 1e6)
    return median(times)


def main():
    o = options(7, lambda p: p.add_argument("--iters", type=int, default=200000))
    dev = resolve_device(o.device, ["add4", "add4_autodiff", "backward_chain100"])
    emit("add4", add_ns(dev, False, o.iters, o.reps), "ns")
    emit("add4_autodiff", add_ns(dev, True, o.iters, o.reps), "ns")
    emit("backward_chain100", chain_backward_us(dev, o.iters // 200, o.reps), "us")


if __name__ == "__main__":
    main()
