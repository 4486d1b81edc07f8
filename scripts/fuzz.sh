#!/usr/bin/env bash
# Fuzzes the parsers that read what other processes and users write: builds
# the libFuzzer targets of tests/fuzz with clang, AddressSanitizer (leaks
# included) and UndefinedBehaviorSanitizer in build-fuzz/, writes their seed
# corpora from the configs and tests, and runs each target SECONDS (default 60),
# as many at once as there are cores (HPU_JOBS).
#
#   scripts/fuzz.sh [SECONDS]
#
# Inputs worth keeping accumulate in build-fuzz/corpus/<target>/. A crash,
# leak, hang (10 s per input) or sanitizer report fails the run, exit 1, with
# the report and the input under build-fuzz/findings/<target>/ (emptied when
# the target next runs); replay it with build-fuzz/fuzz_<target> <input>.
# HPU_JOBS sets the build parallelism and the fuzzers run at once.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: SECONDS must be a positive number, not '$seconds'" >&2; exit 2; }
scripts/install-deps.sh --fuzz
if [[ ! -f build-fuzz/CMakeCache.txt ]]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release -DHPU_FUZZ=ON \
    -DHPU_BUILD_TESTS=OFF -DHPU_BUILD_BENCH=OFF >/dev/null
fi
cmake --build build-fuzz -j "${HPU_JOBS:-$(nproc)}" --target hpu_fuzzers
rm -rf build-fuzz/seeds
build-fuzz/fuzz_seeds build-fuzz/seeds
# One fuzzer per core at a time (HPU_JOBS), each for SECONDS of its own.
fuzz_one() {
  local target="$1"
  rm -rf "build-fuzz/findings/$target"  # only this run's findings, so that what is there is what failed
  mkdir -p "build-fuzz/corpus/$target" "build-fuzz/findings/$target"
  build-fuzz/fuzz_$target -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="build-fuzz/findings/$target/" "build-fuzz/corpus/$target" "build-fuzz/seeds/$target" \
    >"build-fuzz/findings/$target/log.txt" 2>&1
}
jobs_at_once="${HPU_JOBS:-$(nproc)}"
targets=(config control_message shm_lane safetensors chat_template)
failed=()
for ((i = 0; i < ${#targets[@]}; i += jobs_at_once)); do
  batch=("${targets[@]:i:jobs_at_once}")
  pids=()
  for target in "${batch[@]}"; do
    echo "fuzz_$target: ${seconds}s"
    fuzz_one "$target" &
    pids+=($!)
  done
  for j in "${!batch[@]}"; do
    target="${batch[$j]}"
    if wait "${pids[$j]}"; then
      echo "fuzz_$target: $(grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" \
        "build-fuzz/findings/$target/log.txt" | tr '\n' ' ')"
    else
      tail -n 60 "build-fuzz/findings/$target/log.txt" >&2
      echo "fuzz.sh: fuzz_$target failed; the input is in build-fuzz/findings/$target/" >&2
      failed+=("$target")
    fi
  done
done
[[ ${#failed[@]} -eq 0 ]] || exit 1
