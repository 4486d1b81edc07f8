#!/usr/bin/env python3
"""Training throughput of two builds of hpu-train, rounds interleaved (A B A B ...).

For checking that a change leaves speed within noise: build the earlier commit in another
tree (e.g. `git worktree add ../before <rev>` and scripts/build.sh hpu-train there), then

  .venv/bench/bin/python bench/core/compare_builds.py --a build/hpu-train --b ../before/build/hpu-train

Prints samples/s per case for A and B (median [min..max]), the ratio of medians A/B and the
median and range of the per-round ratios.
"""
import argparse
import os
import statistics
import sys
import tempfile

from hpu_bench import hpu_rate


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="hpu-train binary A (e.g. this tree's)")
    ap.add_argument("--b", required=True, help="hpu-train binary B (e.g. an earlier commit's)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    bins = [os.path.abspath(p) for p in (a.a, a.b)]
    cases = [("mlp", 64, 600), ("mlp", 256, 300), ("cnn", 64, 120)]
    with tempfile.TemporaryDirectory() as work:
        os.symlink(os.path.join(repo, "configs"), os.path.join(work, "configs"))
        print(f"A={bins[0]}\nB={bins[1]}\nthreads={a.threads} rounds={a.rounds}", flush=True)
        for kind, batch, steps in cases:
            ra, rb = [], []
            for _ in range(a.rounds):
                ra.append(hpu_rate(bins[0], kind, batch, steps, work, a.threads))
                rb.append(hpu_rate(bins[1], kind, batch, steps, work, a.threads))
            per_round = [x / y for x, y in zip(ra, rb)]
            ma, mb = statistics.median(ra), statistics.median(rb)
            print(f"{kind:3} batch {batch:3}: A {ma:8.0f} samples/s [{min(ra):.0f}..{max(ra):.0f}]  "
                  f"B {mb:8.0f} [{min(rb):.0f}..{max(rb):.0f}]  A/B {ma / mb:.3f}  "
                  f"per round {statistics.median(per_round):.3f} [{min(per_round):.3f}..{max(per_round):.3f}]",
                  flush=True)


if __name__ == "__main__":
    sys.exit(main())
