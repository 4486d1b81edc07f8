#!/usr/bin/env python3
"""Allreduce latency and bus bandwidth: ours side by side with gloo and Open MPI.

For 2 and 4 ranks on this machine (loopback only) and float32 sums of 4 B to
64 MiB, each round runs, one after the other (A B C D, A B C D ...; the
host's speed swings from minute to minute):
  ours      build/bench_allreduce, every rank on one node: the path
            trainer.devices=N takes (shared-memory lanes)
  ours-tcp  the same program with every rank its own node: tcp:// on
            loopback, the path between nodes
  ours-curve  ours-tcp with CURVE encryption, which every address but
            loopback gets: its cost between nodes
  ours-2x2  (4 ranks) 2 nodes x 2 devices: the hierarchical collectives,
            shared memory inside a node and tcp:// between the two
  ours-mpi  build/bench_allreduce started by mpirun with HPU_COLLECTIVES=mpi:
            hpu-train's process group on Open MPI's collectives, over the
            same TCP transport as mpi (the ZeroMQ rendezvous still admits
            the ranks); what hpu-train costs on top of MPI
  gloo      torch.distributed's gloo backend (allreduce_gloo.py under
            PyTorch 2.13: .venv/bench, scripts/install-deps.sh --bench)
  mpi       Open MPI's MPI_Allreduce over its TCP transport (allreduce_mpi.c,
            built here with mpicc; mpirun --mca pml ob1 --mca btl tcp,self)
  mpi-sm    (4 ranks) the same over its shared memory (btl vader,self): one
            host gives Open MPI no way to run 2 x 2 with TCP between the pairs
            only, so mpi (all TCP) and mpi-sm (no TCP) bracket its 2 x 2
Each run first makes 10,000 untimed 64 KiB calls (WARMUP), then times
every size the same way (warm-up, barrier, timed loop, the slowest rank's
mean). Reported: the median over rounds with min..max, of
the time per allreduce and of the bus bandwidth as nccl-tests defines it,
busbw = bytes / time * 2(n-1)/n, and the ratios of the medians. The targets
(printed at the end): ours at least 2x gloo's busbw from 256 KiB up, and at
most half its time at 4 B; ours-tcp at least Open MPI TCP's busbw from
64 KiB to 64 MiB and at most 2x its time at 4 B; ours-2x2 at least Open
MPI's busbw. Nothing is asserted.

Usage: bench/comm/allreduce_vs.py [--rounds 5] [--ranks 2 4] [--kinds ours ours-tcp ...]
                                  [--bin build/bench_allreduce] [--python .venv/bench/bin/python]
                                  [--json out.json]
"""
import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = [4 << (2 * i) for i in range(13)]  # 4 B .. 64 MiB, x4
KINDS = ["ours", "ours-tcp", "ours-curve", "ours-2x2", "ours-mpi", "gloo", "mpi", "mpi-sm"]
FOUR_RANKS_ONLY = {"ours-2x2", "mpi-sm"}
RUN_TIMEOUT = 600  # seconds; a run past it is killed with its process group


# Every run begins with these untimed calls (its plan's first entry; parse() drops its line). With
# more ranks than cores the kernel often starts 3 of 4 ranks on one core and takes up to half a
# second to even them out; the timed sizes after it measure the collective, not that start (4 ranks
# on 2 cores, 64 KiB alltoall: 48-57 us per call while 3 share a core, 35-41 us once 2 and 2 do,
# for either side).
WARMUP = f"{64 << 10}:10000"


def plan(sizes=SIZES):
    """The warm-up, then bytes:iterations for every size: about 256 MiB moved per size, 5..1000 iterations."""
    return ",".join([WARMUP] + [f"{s}:{max(5, min(1000, (256 << 20) // s))}" for s in sizes])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(commands):
    """Starts every (argv, env) at once, each in its own session; returns rank 0's stdout."""
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True) for argv, env in commands]
    outputs = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=RUN_TIMEOUT))
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    for p, (out, err) in zip(procs, outputs):
        if p.returncode != 0:
            sys.exit(f"{' '.join(commands[0][0][:2])}: exit {p.returncode}\n{err}")
    return outputs[0][0]


def parse(out, sizes=SIZES):
    times = {}
    for line in out.splitlines()[1:]:  # the first: the warm-up
        size, seconds = line.split()
        times[int(size)] = float(seconds)
    if sorted(times) != sizes:
        sys.exit(f"incomplete output:\n{out}")
    return times


def base_env(extra):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    env.update(extra)
    return env


def run_ours(binary, n, devices, curve=False, sizes=SIZES):
    """n ranks as n / devices nodes of `devices` ranks each."""
    port, token = free_port(), secrets.token_hex(24)
    commands = []
    for r in range(n):
        env = base_env({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": str(n),
                        "NODE_RANK": str(r // devices), "LOCAL_RANK": str(r % devices), "HPU_JOB_TOKEN": token})
        commands.append(([binary, str(devices), str(n // devices), plan(sizes)] + (["--curve"] if curve else []), env))
    return parse(run_ranks(commands), sizes)


def run_ours_mpi(binary, n, sizes=SIZES):
    """n ranks started by mpirun (every rank of one node), collectives on Open MPI over TCP."""
    port, token = free_port(), secrets.token_hex(24)
    env = base_env({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "HPU_JOB_TOKEN": token,
                    "HPU_COLLECTIVES": "mpi"})
    argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
            "--mca", "btl_tcp_if_include", "lo", "-np", str(n)]
    for variable in ("MASTER_ADDR", "MASTER_PORT", "HPU_JOB_TOKEN", "HPU_COLLECTIVES"):
        argv += ["-x", variable]
    return parse(run_ranks([(argv + [binary, str(n), "1", plan(sizes)], env)]), sizes)


def run_gloo(python, n):
    port = free_port()
    env = base_env({"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"})
    script = os.path.join(HERE, "allreduce_gloo.py")
    return parse(run_ranks([([python, script, str(r), str(n), str(port), plan()], env) for r in range(n)]))


def run_mpi(binary, n, btl="tcp,self", sizes=SIZES, args=()):
    argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "pml", "ob1", "--mca", "btl", btl,
            "--mca", "btl_tcp_if_include", "lo", "-np", str(n), binary, *args, plan(sizes)]
    return parse(run_ranks([(argv, base_env({}))]), sizes)


def build_mpi(out_dir, name="allreduce_mpi"):
    """Compiles bench/comm/<name>.c with mpicc into out_dir unless it is up to date."""
    source = os.path.join(HERE, f"{name}.c")
    binary = os.path.join(out_dir, name)
    newest = max(os.path.getmtime(source), os.path.getmtime(os.path.join(HERE, "mpi_bench.h")))
    if not os.path.exists(binary) or os.path.getmtime(binary) < newest:
        subprocess.run(["mpicc", "-O2", "-o", binary, source], check=True)
    return binary


def busbw(size, seconds, n):
    return size / seconds * 2 * (n - 1) / n / 1e9


def human(size):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def spread(values, fmt):
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}..{fmt.format(max(values))}]"


# Time ratios printed beside the tables: (ours, theirs), when both ran.
RATIOS = [("ours", "gloo"), ("ours", "mpi"), ("ours-tcp", "mpi"), ("ours-curve", "ours-tcp"), ("ours-mpi", "mpi"),
          ("ours-2x2", "mpi"), ("ours-2x2", "mpi-sm")]


def report(results, n, kinds, sizes=SIZES, ratios=RATIOS, what="allreduce", bandwidth=busbw):
    """Tables of the time per call and of `bandwidth`(size, seconds, n) by size, with the ratios of the median
    times of the pairs in `ratios` that both ran."""
    ratios = [(a, b) for a, b in ratios if a in kinds and b in kinds]
    cols = " | ".join(f"{k:>24}" for k in kinds)
    heads = " | ".join(f"{a}/{b}" for a, b in ratios)
    for title, value, fmt in ((f"time per {what} (us)", lambda s, t: t * 1e6, "{:.1f}"),
                              ("bus bandwidth (GB/s)", lambda s, t: bandwidth(s, t, n), "{:.3f}")):
        print(f"\n{n} ranks: {title}, median [min..max]; ratios of the median times")
        print(f"{'size':>7} | {cols} | {heads}")
        for s in sizes:
            v = {k: [value(s, run[s]) for run in results[(k, n)]] for k in kinds}
            t = {k: statistics.median(run[s] for run in results[(k, n)]) for k in kinds}
            print(f"{human(s):>7} | " + " | ".join(f"{spread(v[k], fmt):>24}" for k in kinds) + " | "
                  + " | ".join(f"{t[a] / t[b]:{len(a) + len(b) + 1}.2f}" for a, b in ratios))


def targets(results, n, kinds):
    med = {(k, s): statistics.median(v[s] for v in results[(k, n)]) for k in kinds for s in SIZES}

    def lowest_speedup(ours, theirs, sizes):
        worst = min(sizes, key=lambda s: med[(theirs, s)] / med[(ours, s)])
        return med[(theirs, worst)] / med[(ours, worst)], worst

    def line(text, met, detail):
        print(f"{n} ranks: {text}: {'met' if met else 'MISSED'} ({detail})")

    if {"ours", "gloo"} <= set(kinds):
        ratio, at = lowest_speedup("ours", "gloo", [s for s in SIZES if s >= 256 << 10])
        line("ours busbw >= 2x gloo from 256 KiB up", ratio >= 2, f"lowest ratio {ratio:.2f} at {human(at)}")
        lat = med[("ours", 4)] / med[("gloo", 4)]
        line("ours 4 B time <= 0.5x gloo", lat <= 0.5, f"ratio {lat:.2f}")
    if {"ours-tcp", "mpi"} <= set(kinds):
        ratio, at = lowest_speedup("ours-tcp", "mpi", [s for s in SIZES if s >= 64 << 10])
        line("ours-tcp busbw >= Open MPI TCP from 64 KiB up", ratio >= 1, f"lowest ratio {ratio:.2f} at {human(at)}")
        lat = med[("ours-tcp", 4)] / med[("mpi", 4)]
        line("ours-tcp 4 B time <= 2x Open MPI TCP", lat <= 2, f"ratio {lat:.2f}")
    for theirs in ("mpi", "mpi-sm"):
        if {"ours-2x2", theirs} <= set(kinds):
            ratio, at = lowest_speedup("ours-2x2", theirs, [s for s in SIZES if s >= 64 << 10])
            line(f"ours-2x2 busbw >= {theirs} from 64 KiB up", ratio >= 1, f"lowest ratio {ratio:.2f} at {human(at)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--kinds", nargs="+", default=KINDS, choices=KINDS)
    ap.add_argument("--bin", default="build/bench_allreduce")
    ap.add_argument("--python", default=os.path.join(HERE, "..", "..", ".venv", "bench", "bin", "python"),
                    help="an interpreter with torch (gloo); default: the benchmark environment's")
    ap.add_argument("--json", help="also write every run's times here")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    if shutil.which("mpirun") is None:
        sys.exit("mpirun not found (Debian: openmpi-bin, libopenmpi-dev)")
    mpi = build_mpi(os.path.dirname(binary))
    runners = {"ours": lambda n: run_ours(binary, n, devices=n), "ours-tcp": lambda n: run_ours(binary, n, devices=1),
               "ours-curve": lambda n: run_ours(binary, n, devices=1, curve=True),
               "ours-2x2": lambda n: run_ours(binary, n, devices=2), "ours-mpi": lambda n: run_ours_mpi(binary, n),
               "gloo": lambda n: run_gloo(a.python, n),
               "mpi": lambda n: run_mpi(mpi, n), "mpi-sm": lambda n: run_mpi(mpi, n, btl="vader,self")}
    kinds = {n: [k for k in KINDS if k in a.kinds and (n == 4 or k not in FOUR_RANKS_ONLY)] for n in a.ranks}
    results = {(k, n): [] for n in a.ranks for k in kinds[n]}
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the start; {a.rounds} rounds of "
          + "; ".join(f"{' '.join(kinds[n])} for {n} ranks" for n in a.ranks), flush=True)
    for rnd in range(a.rounds):
        for n in a.ranks:
            for k in kinds[n]:
                results[(k, n)].append(runners[k](n))
        print(f"round {rnd + 1}/{a.rounds} done (load average {os.getloadavg()[0]:.2f})", file=sys.stderr, flush=True)
    for n in a.ranks:
        report(results, n, kinds[n])
    print()
    for n in a.ranks:
        targets(results, n, kinds[n])
    if a.json:
        with open(a.json, "w") as f:
            json.dump({f"{k}/{n}": v for (k, n), v in results.items()}, f, indent=1)


if __name__ == "__main__":
    main()
