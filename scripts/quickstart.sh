#!/usr/bin/env bash
# Quick start, command 1: install dependencies, build, and train the
# Fashion-MNIST MLP on the emulated HPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh hpu-train
exec build/hpu-train fit --config configs/fashion_mnist_mlp.yaml "$@"
