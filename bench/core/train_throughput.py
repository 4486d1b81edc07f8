#!/usr/bin/env python3
"""Training throughput of hpu-train vs PyTorch 2.13 on Fashion-MNIST, side by side.

For each case (MLP batch 64 / 256, CNN batch 64; fp32 and bf16-mixed) the rounds
alternate hpu-train, PyTorch eager and PyTorch with the model under torch.compile
(A B C A B C ...) and report the median samples/s of each with its min..max, and
the ratios of the medians. Then hpu-train's MLP on --threads intra-op threads
against one thread, alternating. Then data parallel, the MLP with batch 64 per
rank on 2 ranks, alternating: hpu-train on one node (trainer.devices=2, shared
memory between the ranks), hpu-train as 2 nodes of one device
(scripts/local-cluster.sh, tcp:// between them), torch DistributedDataParallel
over gloo with 2 processes (one thread each, as hpu-train's 2 ranks get on 2
cores), and hpu-train on 1 rank with --threads threads, which the 2 ranks must
beat.

--load N runs N busy-looping processes beside every round (a host whose other
work competes for the cores); --only picks one comparison.

hpu-train's rate is what Lightning's ThroughputMonitor logs over the second
half of a run of the real CLI (bench/core/hpu_bench.py). PyTorch trains the
same model on the same IDX data held in memory, with the same per-epoch
shuffled batches, dropout, Adam (torch's fused CPU Adam) and the same thread
count (torch_yardstick.py), timed after 10 warm-up steps; bf16-mixed is
torch.autocast(bfloat16) around the forward.

Run it with the benchmark environment's Python (scripts/install-deps.sh --bench):
  .venv/bench/bin/python bench/core/train_throughput.py [--rounds 5] [--threads 2] [--bin build/hpu-train]
                                      [--only mlp|cnn|threads|ddp] [--load N] [--json out.json]
"""
import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn

from hpu_bench import hpu_rate
from torch_yardstick import TorchTrainer, adam, interleave, summary

DATA = "/usr/share/datasets/fashion-mnist"


def load_idx(name):
    with gzip.open(os.path.join(DATA, name), "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def torch_model(kind):
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Dropout(0.2), nn.Linear(256, 128),
                             nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10))
    # ConvNetClassifier's blocks pool before their ReLU (the same function as
    # ReLU then pooling); PyTorch gets the same order, hence the same work.
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.MaxPool2d(2), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1),
                         nn.MaxPool2d(2), nn.ReLU(), nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
                         nn.Dropout(0.25), nn.Linear(128, 10))


def torch_trainer(kind, batch, images, labels, bf16=False, compiled=False, shuffle_seed=0, wrap=None):
    """PyTorch training `kind` (wrapped by `wrap`, e.g. DistributedDataParallel) on the data, in
    per-epoch shuffled batches of `batch`."""
    torch.manual_seed(0)
    model = torch_model(kind)
    if wrap is not None:
        model = wrap(model)
    x_all = torch.from_numpy(((images.astype(np.float32) / 255.0) - 0.2860) / 0.3530).unsqueeze(1)
    y_all = torch.from_numpy(labels.astype(np.int64))
    perm = torch.randperm(len(y_all), generator=torch.Generator().manual_seed(shuffle_seed))

    def batch_of(i):
        idx = perm[(i * batch) % (len(perm) - batch):][:batch]
        return x_all[idx], y_all[idx]

    return TorchTrainer(model, adam(model.parameters()), batch_of, nn.functional.cross_entropy, bf16, compiled)


def torch_ddp_worker(rank, world, port, kind, batch, steps, rates):
    """One process of torch DDP over gloo: `steps` timed steps after 10 warm-up steps; rank 0
    puts the job's samples/s in `rates`."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    images, labels = load_idx("train-images-idx3-ubyte.gz"), load_idx("train-labels-idx1-ubyte.gz")
    trainer = torch_trainer(kind, batch, images, labels, shuffle_seed=rank, wrap=DistributedDataParallel)
    for i in range(10):
        trainer.step()
    dist.barrier()
    t = time.perf_counter()
    for i in range(steps):
        trainer.step()
    dist.barrier()
    if rank == 0:
        rates.put(steps * batch * world / (time.perf_counter() - t))
    dist.destroy_process_group()


def torch_ddp_rate(kind, batch, steps, world=2):
    import socket
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    ctx = mp.get_context("spawn")
    rates = ctx.SimpleQueue()
    mp.start_processes(torch_ddp_worker, args=(world, port, kind, batch, steps, rates), nprocs=world,
                       start_method="spawn")
    return rates.get()


def data_parallel(binary, work, threads, rounds, results):
    """MLP, batch 64 per rank: hpu-train 2 ranks (one node, and 2 nodes), torch DDP, hpu-train 1 rank."""
    kinds = {"hpu-train 2 ranks, 1 node": lambda: hpu_rate(binary, "mlp", 64, 600, work, threads, devices=2),
             "hpu-train 2 nodes x 1 device": lambda: hpu_rate(binary, "mlp", 64, 600, work, threads, nodes=2),
             "torch DDP gloo, 2 processes": lambda: torch_ddp_rate("mlp", 64, 300),
             "hpu-train 1 rank": lambda: hpu_rate(binary, "mlp", 64, 600, work, threads)}
    rates = interleave(kinds, rounds)
    med = {k: statistics.median(v) for k, v in rates.items()}
    for k, v in rates.items():
        print(f"mlp batch  64 per rank: {k:30} {med[k]:8.0f} samples/s [{min(v):.0f}..{max(v):.0f}]", flush=True)
    torch_ddp = med["torch DDP gloo, 2 processes"]
    one_rank = med["hpu-train 1 rank"]
    for k in ("hpu-train 2 ranks, 1 node", "hpu-train 2 nodes x 1 device"):
        print(f"  {k} / torch DDP: {med[k] / torch_ddp:.2f}x; / hpu-train 1 rank: {med[k] / one_rank:.2f}x",
              flush=True)
    results.append({"model": "mlp-data-parallel", "batch_per_rank": 64, "rates": rates,
                    "ratios": {k: med[k] / torch_ddp for k in rates}})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bin", default="build/hpu-train")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--only", choices=["mlp", "cnn", "threads", "ddp"],
                    help="run only the MLP or CNN cases, the intra-op threads or the data-parallel comparison")
    ap.add_argument("--load", type=int, default=0, help="busy-looping processes to run beside the benchmark")
    a = ap.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    binary = os.path.abspath(os.path.join(repo, a.bin)) if not os.path.isabs(a.bin) else a.bin
    torch.set_num_threads(a.threads)
    images, labels = load_idx("train-images-idx3-ubyte.gz"), load_idx("train-labels-idx1-ubyte.gz")
    cases = [(kind, batch, steps, precision) for kind, batch, steps in (("mlp", 64, 600), ("mlp", 256, 300),
                                                                        ("cnn", 64, 120))
             for precision in ("32-true", "bf16-mixed")]
    results = []
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.load)]
    try:
        run_cases(a, binary, repo, images, labels, cases, results)
    finally:
        for b in burners:
            b.kill()
            b.wait()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


def run_cases(a, binary, repo, images, labels, cases, results):
    with tempfile.TemporaryDirectory() as work:
        for cfg in ("configs",):
            os.symlink(os.path.join(repo, cfg), os.path.join(work, cfg))
        print(f"threads={a.threads} rounds={a.rounds} load={a.load} torch={torch.__version__}", flush=True)
        for kind, batch, steps, precision in cases if a.only in (None, "mlp", "cnn") else ():
            if a.only is not None and kind != a.only:
                continue
            bf16 = precision == "bf16-mixed"
            eager = torch_trainer(kind, batch, images, labels, bf16)
            compiled = torch_trainer(kind, batch, images, labels, bf16, compiled=True)
            runs = {"hpu-train": lambda: hpu_rate(binary, kind, batch, steps, work, a.threads,
                                                  extra=[f"--trainer.precision={precision}"]),
                    "torch eager": lambda: eager.steps_per_second(steps // 2) * batch,
                    "torch.compile": lambda: compiled.steps_per_second(steps // 2) * batch}
            rates = interleave(runs, a.rounds)
            med = {k: statistics.median(v) for k, v in rates.items()}
            results.append({"model": kind, "batch": batch, "precision": precision, "rates": rates,
                            "ratio_eager": med["hpu-train"] / med["torch eager"],
                            "ratio_compile": med["hpu-train"] / med["torch.compile"]})
            print(f"{kind} batch {batch} {precision}: " + "  ".join(f"{k} {summary(v)}" for k, v in rates.items())
                  + f"  ratio {med['hpu-train'] / med['torch eager']:.2f}x eager, "
                  f"{med['hpu-train'] / med['torch.compile']:.2f}x compile", flush=True)
        # Intra-op threads: the same run on `threads` threads and on one, alternating.
        for batch, steps in ((64, 600), (256, 300)) if a.only in (None, "threads") else ():
            rates = interleave({"threads": lambda: hpu_rate(binary, "mlp", batch, steps, work, a.threads),
                                "one": lambda: hpu_rate(binary, "mlp", batch, steps, work, 1)}, a.rounds)
            ratio = statistics.median(rates["threads"]) / statistics.median(rates["one"])
            results.append({"model": "mlp-threads", "batch": batch, "threads": rates["threads"],
                            "one_thread": rates["one"], "ratio": ratio})
            print(f"mlp batch {batch:3}: {a.threads} threads {summary(rates['threads'])} samples/s  "
                  f"1 thread {summary(rates['one'])}  ratio {ratio:.2f}x", flush=True)
        if a.only in (None, "ddp"):
            data_parallel(binary, work, a.threads, a.rounds, results)


if __name__ == "__main__":
    sys.exit(main())
