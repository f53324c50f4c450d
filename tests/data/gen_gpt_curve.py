"""Writes the PyTorch oracle of tests/test_gpt.c: a small nanoGPT (bench/torch/gpt_model.py)
trained 200 steps with AdamW in float64 from float32 initial weights.

Run by hand from the repository root (the suite never needs Python):
    /work/main/.venv-bench/bin/python tests/data/gen_gpt_curve.py

Writes
  tests/data/gpt_init.safetensors   the initial weights (f32), by safetensors.torch.save_model,
                                    which writes the tied pair as "lm_head.weight" alone (so the
                                    test also proves cn_gpt_load takes that key)
  tests/data/gpt_nobias_init.safetensors  the same config with bias=False (f32, save_model)
  tests/data/gpt_curve.safetensors  the run:
      data      i64 [L]          the token stream (a seeded Markov chain over the vocabulary)
      offsets   i64 [STEPS, B]   batch s, row r is data[o : o + T], its targets data[o+1 : o+T+1]
      losses    f64 [STEPS]      the loss of every step, before that step's update
      logits0   f64 [B, T, V]    the first batch's logits
      grad.<name> f64            the first step's gradients of a few parameters
      nobias_logits0 f64         the bias=False model's logits for the first batch
    and its settings as metadata (config, lr, betas, eps, weight decay)."""
import os
import sys

import torch
from safetensors.torch import save_file, save_model

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "torch"))
from gpt_model import GPT, GPTConfig, loss_of  # noqa: E402

CONFIG = GPTConfig(vocab_size=30, block_size=16, n_layer=2, n_head=2, n_embd=32, bias=True)
STEPS, BATCH, T, LENGTH = 200, 8, 16, 1024
LR, BETAS, EPS, WEIGHT_DECAY = 3e-3, (0.9, 0.95), 1e-8, 0.1
GRADS = ["transformer.wte.weight", "transformer.wpe.weight",
         "transformer.h.0.attn.c_attn.weight", "transformer.h.0.attn.c_attn.bias",
         "transformer.h.1.mlp.c_proj.weight", "transformer.h.1.ln_2.weight",
         "transformer.ln_f.bias"]


def token_stream(gen):
    """A Markov chain whose rows each favour a few tokens, so that there is something to learn."""
    logits = torch.randn(CONFIG.vocab_size, CONFIG.vocab_size, generator=gen, dtype=torch.float64)
    probs = torch.softmax(3.0 * logits, dim=1)
    data = torch.empty(LENGTH, dtype=torch.int64)
    data[0] = 0
    for i in range(1, LENGTH):
        data[i] = torch.multinomial(probs[data[i - 1]], 1, generator=gen)[0]
    return data


def main():
    torch.manual_seed(1234)
    model = GPT(CONFIG)  # float32
    save_model(model, os.path.join(HERE, "gpt_init.safetensors"))
    gen = torch.Generator().manual_seed(99)
    data = token_stream(gen)
    offsets = torch.randint(0, LENGTH - T, (STEPS, BATCH), generator=gen, dtype=torch.int64)

    model = model.double()
    opt = model.configure_optimizers(WEIGHT_DECAY, LR, BETAS, EPS)
    named = dict(model.named_parameters())
    out = {"data": data, "offsets": offsets}
    losses = torch.empty(STEPS, dtype=torch.float64)
    for step in range(STEPS):
        rows = offsets[step]
        x = torch.stack([data[o:o + T] for o in rows.tolist()])
        y = torch.stack([data[o + 1:o + T + 1] for o in rows.tolist()])
        logits = model(x)
        loss = loss_of(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if step == 0:
            out["logits0"] = logits.detach().clone()
            for name in GRADS:
                out["grad." + name] = named[name].grad.detach().clone()
        opt.step()
        losses[step] = loss.item()
    out["losses"] = losses
    torch.manual_seed(4321)
    nobias = GPT(GPTConfig(**{**CONFIG.__dict__, "bias": False}))
    save_model(nobias, os.path.join(HERE, "gpt_nobias_init.safetensors"))
    x0 = torch.stack([data[o:o + T] for o in offsets[0].tolist()])
    with torch.no_grad():
        out["nobias_logits0"] = nobias.double()(x0)
    meta = {"vocab_size": str(CONFIG.vocab_size), "block_size": str(CONFIG.block_size),
            "n_layer": str(CONFIG.n_layer), "n_head": str(CONFIG.n_head),
            "n_embd": str(CONFIG.n_embd), "bias": str(int(CONFIG.bias)), "lr": repr(LR),
            "beta1": repr(BETAS[0]), "beta2": repr(BETAS[1]), "eps": repr(EPS),
            "weight_decay": repr(WEIGHT_DECAY), "torch": torch.__version__}
    save_file({k: v.contiguous() for k, v in out.items()},
              os.path.join(HERE, "gpt_curve.safetensors"), metadata=meta)
    print(f"loss {losses[0]:.6f} -> {losses[-1]:.6f} over {STEPS} steps")


if __name__ == "__main__":
    main()
