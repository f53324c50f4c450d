#!/usr/bin/env bash
# Installs what cinder needs, builds a release build, and runs the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DCINDER_TESTS=OFF
cmake --build build/release -j"$(nproc)"
build/release/cinder info
for example in build/release/examples/example_*; do
  echo "== ${example##*/}"
  "$example"
done
