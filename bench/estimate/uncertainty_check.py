#!/usr/bin/env python3
"""Checks estimate's likely range on runs no fit has seen: for each of published.py's software 1.19
runs (--held-out), whether Intel's published figure falls inside the range `estimate` prints
beside its figure. The widening rule (device/include/hpu/device/gaudi_model.h) asks for at least
90%; the script prints every run and the count, and exits 1 below 90%.

    /usr/bin/python3 bench/estimate/uncertainty_check.py [--bin build/hpu-train]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from published import HELD_OUT, ROOT, estimate_all  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "hpu-train"))
    a = p.parse_args()
    rows = [r for r in HELD_OUT if r["unit"] == "tokens/s"]
    inside = 0
    for row, (j, _) in zip(rows, estimate_all(os.path.abspath(a.bin), rows)):
        low, high = j["tokens_per_s_range"]
        ok = low <= row["published"] <= high
        inside += ok
        print(f"{row['generation']} {row['model']} {row['setting']}: published {row['published']:,}, "
              f"range {low:,.0f} .. {high:,.0f} {'inside' if ok else 'OUTSIDE'}")
    print(f"{inside} of {len(rows)} inside ({100 * inside / len(rows):.0f}%)")
    sys.exit(0 if inside >= 0.9 * len(rows) else 1)


if __name__ == "__main__":
    main()
