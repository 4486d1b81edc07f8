#!/usr/bin/env python3
"""Kernel benchmarks side by side.

GEMM: hpu-train's gemm (fp32, and bf16 operands) vs a bare Eigen product
(Google Benchmark with random interleaving) and torch.mm on the same
shapes, rounds alternating A B A B.
Conv: the Fashion-MNIST CNN's convolutions, forward + backward at batch 64,
hpu-train's kernels vs torch.nn.functional.conv2d (oneDNN) with the same
thread count, alternating rounds A B A B.

Usage: bench/device/kernels_vs.py [--threads 2] [--rounds 7] [--bin build/bench_kernels]
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import torch


def run_bench(binary, flt, reps, threads):
    out = subprocess.run([binary, f"--benchmark_filter={flt}", f"--benchmark_repetitions={reps}",
                          "--benchmark_enable_random_interleaving=true", "--benchmark_format=json",
                          "--benchmark_min_time=0.2"],
                         check=True, capture_output=True, text=True,
                         env=dict(os.environ, HPU_INTRA_OP_THREADS=str(threads))).stdout
    times = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        times.setdefault(b["run_name"], []).append(b["real_time"] * (1e-3 if b["time_unit"] == "ns" else 1.0))
    return times  # microseconds


def torch_conv_us(layer, iters=20):
    cin, cout, hw = (1, 32, 28) if layer == 1 else (32, 64, 14)
    x = torch.randn(64, cin, hw, hw, requires_grad=layer != 1)
    w = torch.randn(cout, cin, 3, 3, requires_grad=True)
    b = torch.randn(cout, requires_grad=True)
    dy = torch.randn(64, cout, hw, hw)
    for _ in range(3):
        torch.nn.functional.conv2d(x, w, b, padding=1).backward(dy)
    t = time.perf_counter()
    for _ in range(iters):
        torch.nn.functional.conv2d(x, w, b, padding=1).backward(dy)
    return (time.perf_counter() - t) / iters * 1e6


def torch_gemm_us(shape, iters=20):
    """torch's fp32 product for a BM_Gemm* shape "ta/tb/m/n/k/..."."""
    ta, tb, m, n, k = (int(x) for x in shape.split("/")[:5])
    a = torch.randn(k, m) if ta else torch.randn(m, k)
    b = torch.randn(n, k) if tb else torch.randn(k, n)
    opa, opb = (a.t() if ta else a), (b.t() if tb else b)
    for _ in range(3):
        torch.mm(opa, opb)
    t = time.perf_counter()
    for _ in range(iters):
        torch.mm(opa, opb)
    return (time.perf_counter() - t) / iters * 1e6


def spread(v):
    return f"{statistics.median(v):9.1f} [{min(v):.1f}..{max(v):.1f}]"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--bin", default="build/bench_kernels")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"threads={a.threads}, torch {torch.__version__}, mkldnn={torch.backends.mkldnn.is_available()}")

    gemm, torch_us = {}, {}
    for _ in range(a.rounds):  # A B A B ...
        for name, times in run_bench(a.bin, "Gemm", 1, a.threads).items():
            gemm.setdefault(name, []).extend(times)
        for name in gemm:
            if name.startswith("BM_GemmOurs/"):
                shape = name.split("/", 1)[1]
                torch_us.setdefault(shape, []).append(torch_gemm_us(shape))
    print("\nGEMM ta/tb/m/n/k (us per product; ratios are time of the other / ours)")
    for name in sorted(n for n in gemm if n.startswith("BM_GemmOurs/")):
        shape = name.split("/", 1)[1]
        ours = statistics.median(gemm[name])
        eigen = statistics.median(gemm[name.replace("Ours", "Eigen")])
        bf16 = statistics.median(gemm[name.replace("Ours", "OursBf16")])
        print(f"  {shape:28} ours {spread(gemm[name])}  eigen x{eigen / ours:.2f}  torch x{statistics.median(torch_us[shape]) / ours:.2f}"
              f"  ours bf16 {spread(gemm[name.replace('Ours', 'OursBf16')])} x{ours / bf16:.2f} our fp32")

    print("\nConv forward+backward, CNN shapes at batch 64 (us; ratio = ours / torch, <= 1.2 required)")
    for layer in (1, 2):
        ours, theirs = [], []
        for _ in range(a.rounds):  # A B A B ...
            ours.extend(run_bench(a.bin, f"BM_ConvForwardBackward/{layer}/", 1, a.threads).popitem()[1])
            theirs.append(torch_conv_us(layer))
        paired = [o / t for o, t in zip(ours, theirs)]  # each round's ratio: cancels the host's drift
        print(f"  conv{layer}: ours {spread(ours)}  torch {spread(theirs)}  ratio {statistics.median(ours) / statistics.median(theirs):.2f}"
              f"  (per round: median {statistics.median(paired):.2f} [{min(paired):.2f}..{max(paired):.2f}])")


if __name__ == "__main__":
    main()
