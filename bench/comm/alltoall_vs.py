#!/usr/bin/env python3
"""Alltoall time and bus bandwidth: ours side by side with Open MPI.

For 2 and 4 ranks on this machine (loopback only) and 4 KiB to 64 MiB sent
by each rank (float32, one equal block per rank), each round runs, one
after the other (A B C ..., A B C ...; the host's speed swings from minute
to minute):
  ours      build/bench_alltoall, every rank on one node: shared-memory lanes
  ours-tcp  the same with every rank its own node: tcp:// on loopback
  ours-mpi  build/bench_alltoall under mpirun with HPU_COLLECTIVES=mpi:
            hpu-train's process group on Open MPI's MPI_Alltoallv over TCP
  mpi       Open MPI's MPI_Alltoall over its TCP transport (alltoall_mpi.c,
            built here with mpicc; mpirun --mca pml ob1 --mca btl tcp,self)
  mpi-v     the same with MPI_Alltoallv, which hpu-train's alltoall matches
  mpi-sm    MPI_Alltoall over Open MPI's shared memory (btl vader,self)
Each run first makes 10,000 untimed 64 KiB calls (allreduce_vs.WARMUP),
then times every size the same way (warm-up, barrier, timed loop, the
slowest rank's mean); reported: the median over rounds with min..max of the
time per alltoall and of the bus bandwidth, busbw = bytes / time * (n-1)/n
(what crosses between ranks), and the ratios of the median times. The
target (printed at the end): ours-tcp at most Open MPI TCP's MPI_Alltoall
time from 64 KiB up. Nothing is asserted.

Usage: bench/comm/alltoall_vs.py [--rounds 5] [--ranks 2 4] [--kinds ours ours-tcp ...]
                                 [--bin build/bench_alltoall] [--json out.json]
"""
import argparse
import json
import os
import shutil
import statistics
import sys

from allreduce_vs import build_mpi, human, report, run_mpi, run_ours, run_ours_mpi

SIZES = [4096 << (2 * i) for i in range(8)]  # 4 KiB .. 64 MiB, x4
KINDS = ["ours", "ours-tcp", "ours-mpi", "mpi", "mpi-v", "mpi-sm"]
RATIOS = [("ours-tcp", "mpi"), ("ours-tcp", "mpi-v"), ("ours-mpi", "mpi-v"), ("ours", "mpi-sm")]


def busbw(size, seconds, n):
    return size / seconds * (n - 1) / n / 1e9


def target(results, n, kinds):
    if not {"ours-tcp", "mpi"} <= set(kinds):
        return
    med = {(k, s): statistics.median(v[s] for v in results[(k, n)]) for k in ("ours-tcp", "mpi") for s in SIZES}
    sizes = [s for s in SIZES if s >= 64 << 10]
    worst = max(sizes, key=lambda s: med[("ours-tcp", s)] / med[("mpi", s)])
    ratio = med[("ours-tcp", worst)] / med[("mpi", worst)]
    print(f"{n} ranks: ours-tcp time <= Open MPI TCP MPI_Alltoall from 64 KiB up: "
          f"{'met' if ratio <= 1 else 'MISSED'} (highest ratio {ratio:.2f} at {human(worst)})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--kinds", nargs="+", default=KINDS, choices=KINDS)
    ap.add_argument("--bin", default="build/bench_alltoall")
    ap.add_argument("--json", help="also write every run's times here")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    if shutil.which("mpirun") is None:
        sys.exit("mpirun not found (Debian: openmpi-bin, libopenmpi-dev)")
    mpi = build_mpi(os.path.dirname(binary), "alltoall_mpi")
    runners = {"ours": lambda n: run_ours(binary, n, devices=n, sizes=SIZES),
               "ours-tcp": lambda n: run_ours(binary, n, devices=1, sizes=SIZES),
               "ours-mpi": lambda n: run_ours_mpi(binary, n, sizes=SIZES),
               "mpi": lambda n: run_mpi(mpi, n, sizes=SIZES),
               "mpi-v": lambda n: run_mpi(mpi, n, sizes=SIZES, args=["-v"]),
               "mpi-sm": lambda n: run_mpi(mpi, n, btl="vader,self", sizes=SIZES)}
    kinds = [k for k in KINDS if k in a.kinds]
    results = {(k, n): [] for n in a.ranks for k in kinds}
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the start; {a.rounds} rounds of "
          f"{' '.join(kinds)} for {' and '.join(map(str, a.ranks))} ranks", flush=True)
    for rnd in range(a.rounds):
        for n in a.ranks:
            for k in kinds:
                results[(k, n)].append(runners[k](n))
        print(f"round {rnd + 1}/{a.rounds} done (load average {os.getloadavg()[0]:.2f})", file=sys.stderr, flush=True)
    for n in a.ranks:
        report(results, n, kinds, sizes=SIZES, ratios=RATIOS, what="alltoall", bandwidth=busbw)
    print()
    for n in a.ranks:
        target(results, n, kinds)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({f"{k}/{n}": v for (k, n), v in results.items()}, f, indent=1)


if __name__ == "__main__":
    main()
