"""Twin of bench/bench_gpt.c: nanoGPT's GPT (gpt_model.py) with the same sizes, initial weights,
batches and optimizer, the same figures:

  gpt_train_step          ms, median over --reps steps after 3 warm-up steps: batch, forward,
                          cross-entropy, backward, loss.item(), AdamW step
  gpt_train_tokens_per_s  tokens / s at that median
  gpt_forward             ms, median over --reps forward passes under no_grad, eval mode
  gpt_forward_tokens_per_s
  gpt_final_loss          the loss of the last training step

Vocabulary: the distinct bytes of the text (default the science fortunes of the Debian package
fortunes); block 64, n_embd 128, 4 heads, 4 layers, batch 32, f32; AdamW lr 1e-3, betas
(0.9, 0.95), eps 1e-8, weight decay 0.1 on the matrices (configure_optimizers). Window r of a
step starts at (x >> 33) mod (len - 64), x the next value of the LCG
x = x * 6364136223846793005 + 1442695040888963407 mod 2^64 from x = 1, as bench_gpt.c draws it.

  gpt.py [--device D] [--reps N] [--text FILE] [--weights FILE] [--only train|forward]
                                                                  the figures (--only: one loop,
                                                                  as bench_gpt's, for profiling)
  gpt.py --write-weights FILE                                     nanoGPT's init (seed 0), saved
                                                                  with safetensors' save_model
                                                                  for both sides' --weights"""
import torch
from safetensors.torch import load_model, save_model

from common import emit, median, now, options, resolve_device, sync
from gpt_model import GPT, GPTConfig, loss_of

BLOCK, BATCH, WARMUP = 64, 32, 3
TEXT = "/usr/share/games/fortunes/science"
FIGURES = ["gpt_train_step", "gpt_train_tokens_per_s", "gpt_forward", "gpt_forward_tokens_per_s",
           "gpt_final_loss"]
MASK = (1 << 64) - 1


def read_text(path):
    data = open(path, "rb").read()
    vocab = sorted(set(data))
    index = {b: i for i, b in enumerate(vocab)}
    return torch.tensor([index[b] for b in data], dtype=torch.int64), len(vocab)


class Batches:
    def __init__(self, tokens):
        self.tokens, self.state = tokens, 1

    def next(self, device):
        windows = len(self.tokens) - BLOCK
        starts = []
        for _ in range(BATCH):
            self.state = (self.state * 6364136223846793005 + 1442695040888963407) & MASK
            starts.append((self.state >> 33) % windows)
        x = torch.stack([self.tokens[o:o + BLOCK] for o in starts]).to(device)
        y = torch.stack([self.tokens[o + 1:o + BLOCK + 1] for o in starts]).to(device)
        return x, y


def extra(p):
    p.add_argument("--text", default=TEXT)
    p.add_argument("--weights")
    p.add_argument("--write-weights")
    p.add_argument("--only", choices=["train", "forward"])


def main():
    args = options(20, extra)
    tokens, vocab = read_text(args.text)
    config = GPTConfig(vocab_size=vocab, block_size=BLOCK, n_layer=4, n_head=4, n_embd=128)
    if args.write_weights:
        torch.manual_seed(0)
        save_model(GPT(config), args.write_weights)
        return
    device = resolve_device(args.device, FIGURES)
    torch.manual_seed(0)
    model = GPT(config).to(device)
    if args.weights:
        load_model(model, args.weights, device=str(device))
    opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.95), 1e-8)
    batches = Batches(tokens)

    run_train, run_forward = args.only != "forward", args.only != "train"
    times, loss = [], float("nan")
    for s in range(WARMUP + args.reps):
        if not run_train:  # the batches a full run would have drawn
            batches.next(device)
            continue
        t0 = now()
        x, y = batches.next(device)
        l = loss_of(model(x), y)
        opt.zero_grad(set_to_none=True)
        l.backward()
        loss = l.item()
        opt.step()
        sync(device)
        if s >= WARMUP:
            times.append(now() - t0)
    step = median(times) if run_train else 0

    model.eval()
    times = []
    with torch.no_grad():
        for s in range(WARMUP + args.reps if run_forward else 0):
            t0 = now()
            x, _ = batches.next(device)
            model(x)
            sync(device)
            if s >= WARMUP:
                times.append(now() - t0)
    forward = median(times) if run_forward else 0

    if run_train:
        emit("gpt_train_step", step * 1e3, "ms")
        emit("gpt_train_tokens_per_s", BATCH * BLOCK / step, "tokens/s")
    if run_forward:
        emit("gpt_forward", forward * 1e3, "ms")
        emit("gpt_forward_tokens_per_s", BATCH * BLOCK / forward, "tokens/s")
    if run_train:
        emit("gpt_final_loss", loss, "nats")


if __name__ == "__main__":
    main()
