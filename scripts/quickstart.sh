#!/usr/bin/env bash
# Quick start, command 1: install dependencies, build, and train the
# Fashion-MNIST MLP on the emulated HPU. The run's lightning_logs/ is written
# where the script is started (the clone's root in README's quick start).
set -euo pipefail
here="$PWD"
clone="$(cd "$(dirname "$0")/.." && pwd)"
cd "$clone"
scripts/install-deps.sh
scripts/build.sh hpu-train
cd "$here"
exec "$clone/build/hpu-train" fit --config "$clone/configs/fashion_mnist_mlp.yaml" "$@"
