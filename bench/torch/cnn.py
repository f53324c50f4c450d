"""Twin of `cinder train --model cnn --epochs 2 --schedule constant`: training epochs of the
CNN on Fashion-MNIST, each with the test accuracy after it, timed together as cinder's "epoch
time" is (mlp.py's run: the first epoch as cnn_first_epoch, the second as cnn_epoch).

  cnn_first_epoch  s for the first epoch, the libraries' one-time start included
  cnn_epoch        s for the next: 469 steps of batch 128 (the last one 96), shuffled, SGD lr 0.1
                   momentum 0.9, cross-entropy, the loss read back every step; then the test set
                   in batches of 500 under no_grad
  cnn_accuracy     the test accuracy after that epoch (fraction)

The architecture of src/cli/models.c (cnn_new), layer for layer (so the state_dict's keys are
those of cinder's checkpoint): conv 1 -> 32 3x3 padding 1, relu, max-pool 2x2 stride 2,
conv 32 -> 64 3x3 padding 1, relu, max-pool 2x2, flatten (3136), linear 3136 -> 128, relu,
linear 128 -> 10; PyTorch's default initialisation, which cinder's layers copy. The data, the
normalisation and the loop are mlp.py's (run)."""
import torch.nn as nn

from mlp import run


def make_model():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2),    # [N, 32, 14, 14]
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2),   # [N, 64, 7, 7]
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def main():
    run("cnn", make_model, (1, 28, 28))


if __name__ == "__main__":
    main()
