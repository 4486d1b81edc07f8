#!/usr/bin/env bash
# Configures (once) and builds hpu-train in build/ (Release). Extra arguments
# are build targets; none builds everything. HPU_JOBS sets the parallelism.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${HPU_JOBS:-$(nproc)}"
if [[ ! -f build/CMakeCache.txt ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build -j "$jobs" "${targets[@]}"
