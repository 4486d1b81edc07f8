#!/usr/bin/env python3
"""Where a training step's time goes: bench_op_costs (the CLI with a per-op
cost breakdown: wall, time in kernels, fork/join, idle; see op_costs.cc) for
a model at each batch size on 1 and 2 intra-op threads.

Usage: bench/core/op_costs.py [--model mlp] [--batches 64,256] [--threads 1,2] [--steps 400]
                              [--bin build/bench_op_costs]
"""
import argparse
import os
import subprocess
import sys

from hpu_bench import fit_args


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    ap.add_argument("--batches", default="64,256")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--bin", default="build/bench_op_costs")
    a = ap.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    binary = a.bin if os.path.isabs(a.bin) else os.path.join(repo, a.bin)
    for batch in (int(b) for b in a.batches.split(",")):
        for threads in (int(t) for t in a.threads.split(",")):
            print(f"\n=== {a.model}, batch {batch}, {threads} thread(s)", flush=True)
            subprocess.run([binary, *fit_args(a.model, batch, a.steps)], check=True, cwd=repo,
                           env=dict(os.environ, HPU_INTRA_OP_THREADS=str(threads)))


if __name__ == "__main__":
    sys.exit(main())
