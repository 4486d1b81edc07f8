#!/usr/bin/env bash
# Wall time and peak host memory of `hpu-train estimate plan` on GPT-3 175B over 1,024
# Gaudi 2 and on Llama 2 70B over 64, on two cores (taskset -c 0,1), ROUNDS rounds
# alternating the two (default 3); prints each run, then medians with [min..max].
#   bench/estimate/plan_speed.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds="${1:-3}"
bin=build/hpu-train
declare -A configs=(
  [gpt3_175b_1024]=configs/estimate/gpt3_175b_train_1024x_gaudi2.yaml
  [llama2_70b_64]=configs/estimate/llama2_70b_train_64x_gaudi2.yaml
)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((r = 1; r <= rounds; r++)); do
  for name in gpt3_175b_1024 llama2_70b_64; do
    /usr/bin/time -f "$name %e %M" -o "$out" -a taskset -c 0,1 "$bin" estimate plan -c "${configs[$name]}" --top 1 >/dev/null
    tail -1 "$out"
  done
done
python3 - "$out" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, seconds, kb = line.split()
    runs.setdefault(name, []).append((float(seconds), int(kb) / 1024))
for name, v in runs.items():
    s = [x[0] for x in v]; m = [x[1] for x in v]
    print(f"{name}: {statistics.median(s):.1f} s [{min(s):.1f}..{max(s):.1f}], "
          f"peak RSS {statistics.median(m):.0f} MiB [{min(m):.0f}..{max(m):.0f}] ({len(v)} runs)")
PY
