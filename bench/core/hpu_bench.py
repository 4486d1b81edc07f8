"""Steady-state training rate of build/hpu-train, shared by the bench/core scripts.

hpu_rate() runs the real CLI twice with different step counts; the
difference cancels start-up and data loading.
"""
import os
import subprocess
import time


def fit_args(kind, batch, steps, devices=1):
    """`fit` of the Fashion-MNIST MLP or CNN config for `steps` training steps, nothing else."""
    config = "configs/fashion_mnist_mlp.yaml" if kind == "mlp" else "configs/fashion_mnist_cnn.yaml"
    return ["fit", "--config", config, f"--trainer.devices={devices}", "--trainer.max_epochs=1",
            f"--trainer.limit_train_batches={steps}", "--trainer.limit_val_batches=0",
            "--trainer.num_sanity_val_steps=0", "--trainer.logger=false", "--trainer.callbacks=null",
            "--trainer.enable_checkpointing=false", "--trainer.enable_progress_bar=false",
            "--trainer.enable_model_summary=false", f"--data.batch_size={batch}", "--data.num_workers=0"]


def hpu_run(binary, kind, batch, steps, workdir, threads, devices=1, extra=()):
    args = [binary, *fit_args(kind, batch, steps, devices), *extra]
    env = dict(os.environ)
    if devices == 1:
        env["HPU_INTRA_OP_THREADS"] = str(threads)  # with N ranks: cores / N each (the default)
    t = time.perf_counter()
    subprocess.run(args, check=True, cwd=workdir, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def hpu_rate(binary, kind, batch, steps, workdir, threads, devices=1, extra=()):
    """Samples/s over all ranks (each rank takes `batch` per step).

    On a busy host the short run can take as long as the long one; such a
    pair measures nothing and is run again (at most 5 times)."""
    short = max(steps // 6, 5)
    for _ in range(5):
        t_long = hpu_run(binary, kind, batch, steps, workdir, threads, devices, extra)
        t_short = hpu_run(binary, kind, batch, short, workdir, threads, devices, extra)
        if t_long > 1.2 * t_short:
            return (steps - short) * batch * devices / (t_long - t_short)
    raise RuntimeError(f"{kind} batch {batch}: the {steps}-step run never took clearly longer than the "
                       f"{short}-step one; the host is too busy to measure")


def steps_per_second(step, steps, warmup):
    """Runs step(i) for i < warmup untimed, then `steps` times timed; returns steps/s."""
    for i in range(warmup):
        step(i)
    t = time.perf_counter()
    for i in range(steps):
        step(i)
    return steps / (time.perf_counter() - t)
