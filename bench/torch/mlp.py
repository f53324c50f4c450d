"""Twin of `cinder train --model mlp --epochs 2`: training epochs of the MLP 784-256-128-10 on
Fashion-MNIST, each with the test accuracy after it, timed together as cinder's "epoch time" is.

  mlp_first_epoch  s for the first epoch, which includes the libraries' one-time start (kernels
                   generated or chosen on first use)
  mlp_epoch        s for each later epoch (--reps of them, 1 by default): 469 steps of batch 128
                   (the last one 96), shuffled, SGD lr 0.1 momentum 0.9, cross-entropy; the loss
                   read back every step (as cinder does); then the test set in batches of 500
                   under no_grad
  mlp_accuracy     the test accuracy after that epoch (fraction)

The same model and recipe as src/cli/models.c and train.c: nn.Linear's default initialisation
(U(-1/sqrt(in), 1/sqrt(in)) for weights and biases), images scaled to [0, 1] then normalised with
mean 0.2860 and std 0.3530. The data come from the same IDX files (no torchvision download): a
tiny reader below, gzip + numpy. Data loading is not timed."""
import gzip
import os
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from common import emit, now, options, resolve_device, sync

MEAN, STD = 0.2860, 0.3530
EVAL_BATCH = 500


def read_idx(path):
    """An IDX file (gzipped or not) as a numpy array: magic 0 0 type ndim, big-endian dims."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, kind, ndim = struct.unpack(">HBB", data[:4])
    types = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    if zero != 0 or kind not in types:
        raise ValueError(f"{path}: not an IDX file")
    dims = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=types[kind], offset=4 + 4 * ndim).reshape(dims)


def load(directory, prefix, dev):
    x = read_idx(os.path.join(directory, f"{prefix}-images-idx3-ubyte"))
    y = read_idx(os.path.join(directory, f"{prefix}-labels-idx1-ubyte"))
    x = torch.from_numpy(x.reshape(len(x), 784).astype(np.float32) / 255.0)
    x = (x - MEAN) / STD
    return x.to(dev), torch.from_numpy(y.astype(np.int64)).to(dev)


def accuracy(model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), EVAL_BATCH):
            correct += (model(x[i:i + EVAL_BATCH]).argmax(1) == y[i:i + EVAL_BATCH]).sum().item()
    model.train()
    return correct / len(x)


def run(prefix, make_model, image_shape=(784,)):
    """Timed epochs of make_model() on Fashion-MNIST (images viewed as image_shape): the first
    printed as <prefix>_first_epoch, then --reps N more, each as <prefix>_epoch and
    <prefix>_accuracy."""
    def extra(p):
        p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
        p.add_argument("--batch", type=int, default=128)
        p.add_argument("--seed", type=int, default=42)
        p.add_argument("--limit", type=int, default=0, help="first N training images only")
        p.add_argument("--test-limit", type=int, default=0, help="first N test images only")
    o = options(1, extra)
    dev = resolve_device(o.device, [f"{prefix}_epoch", f"{prefix}_accuracy"])
    train_x, train_y = load(o.data, "train", dev)
    test_x, test_y = load(o.data, "t10k", dev)
    if o.limit:
        train_x, train_y = train_x[:o.limit], train_y[:o.limit]
    if o.test_limit:
        test_x, test_y = test_x[:o.test_limit], test_y[:o.test_limit]
    train_x = train_x.view(len(train_x), *image_shape)  # views: nothing copied
    test_x = test_x.view(len(test_x), *image_shape)
    torch.manual_seed(o.seed)
    model = make_model().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(o.seed)
    for epoch in range(1 + o.reps):
        sync(dev)
        t0 = now()
        order = torch.randperm(len(train_x), generator=gen).to(dev)
        for i in range(0, len(order), o.batch):
            idx = order[i:i + o.batch]
            loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss.item()
        acc = accuracy(model, test_x, test_y)
        sync(dev)
        if epoch == 0:
            emit(f"{prefix}_first_epoch", now() - t0, "s")
            continue
        emit(f"{prefix}_epoch", now() - t0, "s")
        emit(f"{prefix}_accuracy", acc, "fraction")


def main():
    run("mlp", lambda: nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128),
                                     nn.ReLU(), nn.Linear(128, 10)))


if __name__ == "__main__":
    main()
