"""Steady-state training rate of build/hpu-train, shared by the bench/core scripts.

hpu_rate() runs the real CLI once with Lightning's ThroughputMonitor and
reads the rate it logged over the second half of the run: start-up, data
loading at start and the first steps' warm-up are outside that window, and
nothing is subtracted. (Subtracting a short run from a long one, as this
did before, measured start-up jitter as much as training: a 2-rank MLP run
swung from 163k to 1.33M samples/s between rounds.)
"""
import csv
import os
import shutil
import subprocess
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fit_args(kind, batch, steps, devices=1):
    """`fit` of the Fashion-MNIST MLP or CNN config for `steps` training steps, nothing else."""
    config = "configs/fashion_mnist_mlp.yaml" if kind == "mlp" else "configs/fashion_mnist_cnn.yaml"
    return ["fit", "--config", config, f"--trainer.devices={devices}", "--trainer.max_epochs=1000",
            f"--trainer.max_steps={steps}", "--trainer.limit_val_batches=0",
            "--trainer.num_sanity_val_steps=0", "--trainer.logger=false", "--trainer.callbacks=null",
            "--trainer.enable_checkpointing=false", "--trainer.enable_progress_bar=false",
            "--trainer.enable_model_summary=false", f"--data.batch_size={batch}", "--data.num_workers=0"]


def _monitored(steps, log_dir):
    """A config that logs ThroughputMonitor's rate over the last half of `steps` at the end
    (its window covers the steps since the log at the half)."""
    half = max(steps // 2, 2)
    return ("trainer:\n"
            f"  logger: {{class_path: CSVLogger, init_args: {{save_dir: '{log_dir}', name: bench}}}}\n"
            f"  callbacks: [{{class_path: ThroughputMonitor, init_args: {{window_size: {half + 1}}}}}]\n"
            f"  log_every_n_steps: {half}\n")


def _last_rate(log_dir):
    with open(os.path.join(log_dir, "bench", "version_0", "metrics.csv")) as f:
        rates = [float(row["train/samples_per_sec"]) for row in csv.DictReader(f) if row.get("train/samples_per_sec")]
    if not rates:
        raise RuntimeError(f"no train/samples_per_sec in {log_dir}")
    return rates[-1]


def monitored_rate(command, steps, workdir, env):
    """Samples/s that ThroughputMonitor logs over the second half of the `steps`-step fit that
    `command` runs (hpu-train's argv, or a launcher's around it, without --trainer.logger or
    --trainer.callbacks)."""
    log_dir = tempfile.mkdtemp(prefix="hpu-bench-", dir=workdir)
    try:
        overlay = os.path.join(log_dir, "monitor.yaml")
        with open(overlay, "w") as f:
            f.write(_monitored(steps, log_dir))
        env = {"HPU_LOG_LEVEL": "warn", **env}
        subprocess.run([*command, "--config", overlay], check=True, cwd=workdir, env=env, stdout=subprocess.DEVNULL)
        return _last_rate(log_dir)
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)


def hpu_rate(binary, kind, batch, steps, workdir, threads, devices=1, extra=(), nodes=1):
    """Samples/s of the whole job (each rank takes `batch` per step) over the second half of
    a `steps`-step run. `nodes` > 1 runs that many nodes of `devices` ranks on this machine
    with scripts/local-cluster.sh (tcp:// between them, as between machines)."""
    args = [a for a in fit_args(kind, batch, steps, devices)
            if not a.startswith(("--trainer.logger=", "--trainer.callbacks="))] + list(extra)
    env = dict(os.environ)
    if devices == 1 and nodes == 1:
        env["HPU_INTRA_OP_THREADS"] = str(threads)  # with N ranks: cores / N each (the default)
    elif nodes > 1:  # the nodes share this machine's cores
        env["HPU_INTRA_OP_THREADS"] = str(max(1, threads // (nodes * devices)))
    if nodes > 1:
        command = ["bash", os.path.join(REPO, "scripts", "local-cluster.sh"), "--nodes", str(nodes), "--devices",
                   str(devices), "--bin", binary, "--", *args]
    else:
        command = [binary, *args]
    return monitored_rate(command, steps, workdir, env)
