"""Twin of bench/bench_quant.c: PyTorch's dynamically quantized Linear (fbgemm: int8 weights per
tensor, activations quantized per call) and its f32 Linear, 4096 x 4096, no bias.

  quant_f32_b1, quant_f32_b64   ms of F.linear in f32 at batch 1 and 64
  quant_q8_b1, quant_q8_b64     ms of torch.ao.nn.quantized.dynamic.Linear (qint8)
(PyTorch has no 4-bit dynamic Linear on the CPU: the q4 figures are cinder's alone.)
"""
from common import emit, median, now, options, resolve_device
import torch
import torch.nn.functional as F

DIM = 4096


def timed(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        t0 = now()
        fn()
        times.append(now() - t0)
    return median(times)


def main():
    o = options(20)
    figures = ["quant_f32_b1", "quant_f32_b64", "quant_q8_b1", "quant_q8_b64"]
    dev = resolve_device(o.device, figures)
    if dev.type != "cpu":
        for f in figures:
            print(f"skip {f}: fbgemm's dynamic quantization runs on the CPU")
        return
    torch.backends.quantized.engine = "fbgemm"
    g = torch.Generator().manual_seed(19)
    w = torch.randn(DIM, DIM, generator=g) * 0.02
    lin = torch.nn.Linear(DIM, DIM, bias=False)
    with torch.no_grad():
        lin.weight.copy_(w)
    qlin = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(lin), {torch.nn.Linear},
                                                   dtype=torch.qint8)
    with torch.no_grad():
        for i, batch in enumerate((1, 64)):
            x = torch.randn(batch, DIM, generator=g)
            emit(figures[i], 1e3 * timed(lambda: F.linear(x, w), o.reps), "ms")
            emit(figures[2 + i], 1e3 * timed(lambda: qlin(x), o.reps), "ms")


if __name__ == "__main__":
    main()
