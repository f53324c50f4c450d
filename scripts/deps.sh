#!/usr/bin/env bash
# Installs the Debian packages cinder builds and runs with. Safe to run again.
set -euo pipefail
packages=(build-essential cmake pkg-config libopenblas-dev libdnnl-dev libkissfft-dev zlib1g-dev libdlpack-dev
  dataset-fashion-mnist fortunes openmpi-bin libopenmpi-dev)
if [ "${1:-}" = "--test" ]; then
  # libtsan2: gcc's ThreadSanitizer runtime (scripts/tsan.sh); libclang-rt-14-dev: clang's sanitizers
  # and libFuzzer, with clang and its OpenMP runtime libomp-dev (scripts/fuzz.sh)
  packages+=(libclang-rt-14-dev libtsan2 clang libomp-dev)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
