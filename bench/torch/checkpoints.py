"""PyTorch checkpoints both ways: cinder's checkpoints load into PyTorch's nn.Sequential, and
PyTorch's load into `cinder eval`, with the same test accuracy on both sides.

For each model (mlp, cnn), the PyTorch nn.Sequential equivalent to src/cli/models.c:

  torch -> cinder  trains the model for one epoch in PyTorch, evaluates it on the test set,
                   saves its state_dict with safetensors.torch.save_file, runs
                   `cinder eval --load` on the file and checks that cinder counts the same
                   correct images (|accuracy difference| <= 1e-4);
  cinder -> torch  runs `cinder train --model X --epochs 1 --save FILE`, loads FILE with
                   load_state_dict(strict=True) (every key, shape and dtype as PyTorch's),
                   evaluates it in PyTorch and checks the accuracy against the one that
                   `cinder train` printed (<= 1e-4) and the count `cinder eval` gives.

Images are scaled as cinder scales them (f32 pixel / 255, then (x - 0.2860) / 0.3530), and read
from the same IDX files (mlp.py's reader). Prints a table; exits 1 when a check fails.

  --write-test-data DIR  also writes the suite's data (tests/data): torch_mlp.safetensors, the
                         PyTorch-trained MLP with its PyTorch test accuracy in the file's
                         metadata, and torch_state_dict.txt, the keys, dtypes and shapes of both
                         models' state_dicts as PyTorch has them.

usage: python bench/torch/checkpoints.py --cinder build/release/cinder [--out DIR]
       [--models mlp,cnn] [--write-test-data tests/data]

PyPI torch and safetensors; not a dependency of cinder or its tests."""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from mlp import read_idx

MEAN, STD = 0.2860, 0.3530
EVAL_BATCH = 500
TOLERANCE = 1e-4


def make_model(kind):
    """The nn.Sequential whose state_dict is cinder's checkpoint (src/cli/models.h)."""
    if kind == "mlp":
        return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                             nn.Linear(128, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def load(directory, prefix, kind):
    """Images f32 normalised as cinder does ([N, 784], or [N, 1, 28, 28] for the cnn), labels."""
    x = read_idx(os.path.join(directory, f"{prefix}-images-idx3-ubyte"))
    y = read_idx(os.path.join(directory, f"{prefix}-labels-idx1-ubyte"))
    x = torch.from_numpy(x.reshape(len(x), 784).copy()).to(torch.float32) / 255.0
    x = (x - MEAN) * (1.0 / STD)  # as cinder normalises: add -mean, then multiply by 1/std
    if kind == "cnn":
        x = x.reshape(len(x), 1, 28, 28)
    return x, torch.from_numpy(y.astype("int64"))


def correct(model, x, y):
    """How many test images the model classifies right, in batches of 500 (as cinder eval)."""
    model.eval()
    hits = 0
    with torch.no_grad():
        for i in range(0, len(x), EVAL_BATCH):
            hits += (model(x[i:i + EVAL_BATCH]).argmax(1) == y[i:i + EVAL_BATCH]).sum().item()
    return hits


def train_torch(kind, x, y, seed, lr):
    """One epoch: batch 128, shuffled, SGD momentum 0.9, cross-entropy."""
    torch.manual_seed(seed)
    model = make_model(kind)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    model.train()
    for i in range(0, len(order), 128):
        idx = order[i:i + 128]
        loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model


def run(cmd, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


def cinder_eval(cinder, path, data, threads):
    """(accuracy, correct) that `cinder eval --load path` prints."""
    out = run([cinder, "eval", "--load", path, "--data", data], threads)
    m = re.search(r"test accuracy ([0-9.]+) \((\d+) correct\)", out)
    if not m:
        sys.exit(f"cinder eval printed no accuracy:\n{out}")
    return float(m.group(1)), int(m.group(2))


def state_dict_lines(kind):
    """'<model> <key> <dtype> <d0,d1,...>' for each entry of the PyTorch state_dict."""
    lines = []
    for key, t in make_model(kind).state_dict().items():
        dtype = {torch.float32: "F32", torch.int64: "I64"}[t.dtype]
        lines.append(f"{kind} {key} {dtype} {','.join(str(d) for d in t.shape)}")
    return lines


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cinder", default="build/release/cinder")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--models", default="mlp,cnn")
    p.add_argument("--out", default=None, help="where the checkpoints go (default: a temp dir)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--write-test-data", default=None, metavar="DIR")
    o = p.parse_args()
    torch.set_num_threads(o.threads)
    out = o.out or tempfile.mkdtemp(prefix="cinder_torch_ckpt_")
    os.makedirs(out, exist_ok=True)
    lr = {"mlp": 0.1, "cnn": 0.05}
    rows, failed = [], False
    print(f"PyTorch {torch.__version__}, {o.threads} threads; cinder {o.cinder}; data {o.data}")
    for kind in o.models.split(","):
        train_x, train_y = load(o.data, "train", kind)
        test_x, test_y = load(o.data, "t10k", kind)
        n = len(test_x)

        # torch -> cinder
        model = train_torch(kind, train_x, train_y, o.seed, lr[kind])
        t_correct = correct(model, test_x, test_y)
        path = os.path.join(out, f"torch_{kind}.safetensors")
        meta = {"format": "pt", "model": kind, "trained_by": f"torch {torch.__version__}",
                "test_images": str(n), "test_correct": str(t_correct),
                "test_accuracy": repr(t_correct / n)}
        save_file(model.state_dict(), path, metadata=meta)
        c_acc, c_correct = cinder_eval(o.cinder, path, o.data, o.threads)
        ok = abs(c_correct / n - t_correct / n) <= TOLERANCE and abs(c_acc - t_correct / n) <= TOLERANCE
        failed |= not ok
        rows.append((kind, "torch -> cinder", "PyTorch", t_correct / n, c_correct / n,
                     f"{t_correct} / {c_correct}", ok))
        if o.write_test_data and kind == "mlp":
            os.makedirs(o.write_test_data, exist_ok=True)
            save_file(model.state_dict(), os.path.join(o.write_test_data, "torch_mlp.safetensors"),
                      metadata=meta)

        # cinder -> torch
        path = os.path.join(out, f"cinder_{kind}.safetensors")
        printed = run([o.cinder, "train", "--model", kind, "--epochs", "1", "--data", o.data,
                       "--threads", str(o.threads), "--save", path], o.threads)
        m = re.search(r"epoch 1/1: .*test accuracy ([0-9.]+)", printed)
        if not m:
            sys.exit(f"cinder train printed no accuracy:\n{printed}")
        c_train_acc = float(m.group(1))
        _, c_correct = cinder_eval(o.cinder, path, o.data, o.threads)
        model = make_model(kind)
        model.load_state_dict(load_file(path), strict=True)  # raises on any other key or shape
        t_correct = correct(model, test_x, test_y)
        ok = (abs(t_correct / n - c_train_acc) <= TOLERANCE
              and abs(t_correct / n - c_correct / n) <= TOLERANCE)
        failed |= not ok
        rows.append((kind, "cinder -> torch", "cinder", t_correct / n, c_train_acc,
                     f"{t_correct} / {c_correct}", ok))

    print()
    print("| model | checkpoint | trained by | PyTorch accuracy | cinder accuracy | "
          "correct (PyTorch / cinder eval) | within 1e-4 |")
    print("|---|---|---|---|---|---|---|")
    for kind, way, by, t_acc, c_acc, counts, ok in rows:
        print(f"| {kind} | {way} | {by} | {t_acc:.4f} | {c_acc:.4f} | {counts} | "
              f"{'yes' if ok else 'NO'} |")

    if o.write_test_data:
        lines = state_dict_lines("mlp") + state_dict_lines("cnn")
        with open(os.path.join(o.write_test_data, "torch_state_dict.txt"), "w") as f:
            f.write("# <model> <key> <dtype> <shape>: the state_dict of the PyTorch nn.Sequential "
                    "equivalent to each\n# model of src/cli/models.c, written by "
                    "bench/torch/checkpoints.py --write-test-data (torch "
                    f"{torch.__version__})\n")
            f.write("\n".join(lines) + "\n")
        print(f"\nwrote {o.write_test_data}/torch_mlp.safetensors and torch_state_dict.txt")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
