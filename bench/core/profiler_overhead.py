#!/usr/bin/env python3
"""Profiler overhead on the Fashion-MNIST MLP: steady-state step time with no
profiler, SimpleProfiler, and HPUProfiler recording every step (its worst
case: schedule wait 0, warmup 0, active = all steps, trace written at the end),
interleaved (A B C A B C ...). Prints the median step time of each with its
min..max and the overhead relative to no profiler.

Usage: bench/core/profiler_overhead.py [--rounds 5] [--threads 2] [--batch 64] [--bin build/hpu-train]
"""
import argparse
import os
import statistics
import sys
import tempfile

from hpu_bench import hpu_rate

STEPS = 600
CASES = {
    "none": [],
    "simple": ["--trainer.profiler=simple"],
    "hpu": ["--trainer.profiler=HPUProfiler",
            f"--trainer.profiler.schedule={{wait: 0, warmup: 0, active: {STEPS}, repeat: 1}}"],
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--bin", default="build/hpu-train")
    a = ap.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    binary = a.bin if os.path.isabs(a.bin) else os.path.abspath(os.path.join(repo, a.bin))
    step_ms = {name: [] for name in CASES}
    with tempfile.TemporaryDirectory() as work:
        os.symlink(os.path.join(repo, "configs"), os.path.join(work, "configs"))
        for _ in range(a.rounds):
            for name, extra in CASES.items():
                rate = hpu_rate(binary, "mlp", a.batch, STEPS, work, a.threads, extra=extra)
                step_ms[name].append(1e3 * a.batch / rate)
    base = statistics.median(step_ms["none"])
    print(f"MLP batch {a.batch}, {STEPS} steps, threads={a.threads}, rounds={a.rounds}")
    for name, times in step_ms.items():
        m = statistics.median(times)
        print(f"{name:7} {m:7.3f} ms/step [{min(times):.3f}..{max(times):.3f}]  overhead {100 * (m / base - 1):+6.2f}%")


if __name__ == "__main__":
    sys.exit(main())
