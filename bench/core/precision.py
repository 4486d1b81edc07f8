#!/usr/bin/env python3
"""Step throughput and peak device memory per precision, side by side.

For the Fashion-MNIST MLP and CNN, every precision (32-true, bf16-mixed,
bf16-true, 16-mixed, fp8) trains the same batches; rounds alternate the
precisions. Throughput is the steady-state samples/s (two runs with
different step counts, the difference cancels start-up); peak memory is
DeviceStatsMonitor's MaxInUse at the end. Ratios are to 32-true.

Usage: bench/core/precision.py [--rounds 3] [--bin build/hpu-train]
"""
import argparse
import csv
import os
import statistics
import subprocess
import tempfile
import time

PRECISIONS = ["32-true", "bf16-mixed", "bf16-true", "16-mixed", "fp8"]


def run(binary, config, precision, steps, workdir, logged):
    args = [binary, "fit", "--config", config, "--trainer.max_epochs=1", f"--trainer.limit_train_batches={steps}",
            "--trainer.limit_val_batches=0", "--trainer.num_sanity_val_steps=0", "--trainer.enable_checkpointing=false",
            "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false", "--data.num_workers=0",
            f"--trainer.precision={precision}", f"--trainer.log_every_n_steps={1 if logged else steps}"]
    if logged:
        args += ["--trainer.callbacks=[DeviceStatsMonitor]", f"--trainer.default_root_dir={workdir}/{precision}"]
    else:
        args += ["--trainer.callbacks=null", "--trainer.logger=false"]
    t = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def peak(workdir, precision):
    versions = sorted(os.listdir(f"{workdir}/{precision}/lightning_logs"))
    rows = list(csv.DictReader(open(f"{workdir}/{precision}/lightning_logs/{versions[-1]}/metrics.csv")))
    key = "DeviceStatsMonitor.on_train_batch_end/MaxInUse"
    return max(float(r[key]) for r in rows if r.get(key))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bin", default="build/hpu-train")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    cases = [("MLP", "configs/fashion_mnist_mlp.yaml", 64, 600), ("CNN", "configs/fashion_mnist_cnn.yaml", 64, 120)]
    with tempfile.TemporaryDirectory() as work:
        for name, config, batch, steps in cases:
            rates = {p: [] for p in PRECISIONS}
            for _ in range(a.rounds):
                for p in PRECISIONS:  # A B C D E A B C D E ...
                    t_long = run(binary, config, p, steps, work, False)
                    t_short = run(binary, config, p, steps // 6, work, False)
                    rates[p].append((steps - steps // 6) * batch / max(t_long - t_short, 1e-9))
            peaks = {}
            for p in PRECISIONS:
                run(binary, config, p, 20, work, True)
                peaks[p] = peak(work, p)
            base_rate, base_peak = statistics.median(rates["32-true"]), peaks["32-true"]
            print(f"\n{name} (batch {batch}):  precision  samples/s [min..max]  ratio  peak MaxInUse  ratio")
            for p in PRECISIONS:
                r = statistics.median(rates[p])
                print(f"  {p:11} {r:9.0f} [{min(rates[p]):.0f}..{max(rates[p]):.0f}]  {r / base_rate:5.2f}x"
                      f"  {peaks[p] / 1e6:8.3f} MB  {peaks[p] / base_peak:5.2f}x", flush=True)


if __name__ == "__main__":
    main()
