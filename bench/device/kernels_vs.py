#!/usr/bin/env python3
"""Kernel benchmarks side by side.

Peak: the fp32 FMA peak of the intra-op threads, probed with independent FMA
chains (bench_kernels' BM_FmaPeak), measured in the same rounds as the GEMMs.
GEMM: hpu-train's gemm (fp32, and bf16 operands) on the instruction set
HPU_CPU_ISA picks (the best this CPU runs by default; --isa runs others too),
as GFLOP/s, % of the peak, and against torch.mm on the same shapes; rounds
alternate A B A B.
Conv: the Fashion-MNIST CNN's convolutions, forward + backward at batch 64,
hpu-train's kernels vs torch.nn.functional.conv2d (oneDNN) with the same
thread count, alternating rounds A B A B.

Usage: bench/device/kernels_vs.py [--threads 2] [--rounds 7] [--isa avx512_bf16,avx2,portable]
                                  [--bin build/bench_kernels]
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import torch


def run_bench(binary, flt, reps, threads, isa=None):
    env = dict(os.environ, HPU_INTRA_OP_THREADS=str(threads))
    if isa:
        env["HPU_CPU_ISA"] = isa
    out = subprocess.run([binary, f"--benchmark_filter={flt}", f"--benchmark_repetitions={reps}",
                          "--benchmark_enable_random_interleaving=true", "--benchmark_format=json",
                          "--benchmark_min_time=0.2"],
                         check=True, capture_output=True, text=True, env=env).stdout
    times = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        times.setdefault(b["run_name"], []).append(b["real_time"] * (1e-3 if b["time_unit"] == "ns" else 1.0))
    return times  # microseconds


def fma_peak(binary, threads, isa):
    """GFLOP/s of the FMA probe on `threads` threads (its own counter)."""
    env = dict(os.environ, HPU_INTRA_OP_THREADS=str(threads))
    if isa:
        env["HPU_CPU_ISA"] = isa
    out = subprocess.run([binary, "--benchmark_filter=FmaPeak", "--benchmark_format=json"], check=True,
                         capture_output=True, text=True, env=env).stdout
    return next(b["GFLOP/s"] for b in json.loads(out)["benchmarks"] if b.get("run_type") == "iteration") / 1e9


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


def flops(shape):
    m, n, k = (int(x) for x in shape.split("/")[2:5])
    return 2.0 * m * n * k


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--isa", default="", help="comma list of HPU_CPU_ISA paths to run (default: the best)")
    ap.add_argument("--bin", default="build/bench_kernels")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"threads={a.threads}, torch {torch.__version__}, mkldnn={torch.backends.mkldnn.is_available()}")
    isas = [i for i in a.isa.split(",") if i] or [None]

    runs = {isa: {} for isa in isas}  # isa -> benchmark name -> [us]
    peaks = {isa: [] for isa in isas}  # GFLOP/s
    torch_us = {}
    for _ in range(a.rounds):  # A B A B ...
        for isa in isas:
            peaks[isa].append(fma_peak(a.bin, a.threads, isa))
            for name, times in run_bench(a.bin, "Gemm", 1, a.threads, isa).items():
                runs[isa].setdefault(name, []).extend(times)
        for name in runs[isas[0]]:
            if name.startswith("BM_GemmOurs/"):
                shape = name.split("/", 1)[1].split("/real_time")[0]
                torch_us.setdefault(shape, []).append(torch_gemm_us(shape))
    for isa in isas:
        gemm = runs[isa]
        peak_gflops = peaks[isa]
        pk = statistics.median(peak_gflops)
        print(f"\n[{isa or 'default ISA'}] fp32 FMA peak, {a.threads} threads: {pk:.0f} GFLOP/s "
              f"[{min(peak_gflops):.0f}..{max(peak_gflops):.0f}]")
        print("GEMM ta/tb/m/n/k: us per product [min..max], GFLOP/s, % of peak, torch.mm's time / ours, bf16")
        for name in sorted(n for n in gemm if n.startswith("BM_GemmOurs/")):
            shape = name.split("/", 1)[1].split("/real_time")[0]
            ours = statistics.median(gemm[name])
            gf = flops(shape) / ours / 1e3
            bf16 = statistics.median(gemm[name.replace("Ours", "OursBf16")])
            print(f"  {shape:16} ours {spread(gemm[name])}  {gf:6.0f} GFLOP/s {100 * gf / pk:4.0f}%  "
                  f"torch x{statistics.median(torch_us[shape]) / ours:.2f}  bf16 {spread(gemm[name.replace('Ours', 'OursBf16')])} "
                  f"x{ours / bf16:.2f} our fp32")

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
