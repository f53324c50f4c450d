#!/usr/bin/env bash
# Installs what cinder needs (Fashion-MNIST included), builds a release build (the examples with
# it), and runs the main job: `cinder train` trains the MLP on Fashion-MNIST for 3 epochs, saving
# the model and a plot of its training curves, and `cinder eval` tests the saved model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DCINDER_TESTS=OFF
cmake --build build/release -j"$(nproc)"
build/release/cinder info
build/release/cinder train --model mlp --epochs 3 \
  --save build/release/mlp.safetensors --plot build/release/mlp_curves.svg
build/release/cinder eval --load build/release/mlp.safetensors
