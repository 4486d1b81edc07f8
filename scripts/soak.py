#!/usr/bin/env python3
"""Soak test of elastic restarts (not part of the test suite: it runs for minutes).

Trains a small model (BoringModel on RandomDataModule) on RANKS local ranks for
STEPS steps with a checkpoint every 100 steps, twice: once undisturbed, once
under trainer.max_restarts with a random rank killed (SIGKILL, through the
test-only HPU_FAULT hook) about every KILL_EVERY steps, each kill in its own
restart round. Reports the steps completed, the restarts, and the time lost
per restart, and checks that nothing was lost: the final weights and
optimizer state of both runs are equal, bit for bit.

  scripts/soak.py [--ranks 4] [--steps 10000] [--kill-every 500] [--seed 1]
                  [--bin build/hpu-train] [--keep DIR]

Exit code 0 when the weights agree and the run completed, 1 otherwise.
"""
import argparse
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

CONFIG = """seed_everything: 42
trainer:
  devices: {ranks}
  max_steps: {steps}
  max_epochs: -1
  limit_val_batches: 0
  num_sanity_val_steps: 0
  log_every_n_steps: 100
  enable_progress_bar: false
  enable_model_summary: false
  logger:
    - class_path: CSVLogger
      init_args: {{save_dir: .}}
  callbacks:
    - class_path: ModelCheckpoint
      init_args: {{every_n_train_steps: 100, save_last: true, save_top_k: 1}}
model: BoringModel
data:
  class_path: RandomDataModule
  init_args: {{size: 64, length: 256, batch_size: 2}}
optimizer: {{class_path: Adam, init_args: {{lr: 0.001}}}}
"""


def tensors(path):
    """The tensor table and data bytes of a safetensors file, and its step."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    data = blob[8 + n :]
    out = {name: data[info["data_offsets"][0] : info["data_offsets"][1]] for name, info in header.items()}
    return out, meta


def run(binary, workdir, args, env):
    start = time.monotonic()
    proc = subprocess.run([binary, "fit", "-c", "soak.yaml", *args], cwd=workdir, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=3600)
    return proc.returncode, proc.stdout, time.monotonic() - start


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=10000)
    p.add_argument("--kill-every", type=int, default=500)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--bin", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "hpu-train"))
    p.add_argument("--keep", help="run in this directory and keep it (default: a temporary one)")
    a = p.parse_args()

    rng = random.Random(a.seed)
    kills = []  # (round, rank, step): round k's kill, after the checkpoint round k resumed from
    for k, at in enumerate(range(a.kill_every, a.steps, a.kill_every)):
        kills.append((k, rng.randrange(a.ranks), at + rng.randrange(-a.kill_every // 5, a.kill_every // 5 + 1)))
    fault = ";".join(f"crash,rank={r},step={s},restart={k}" for k, r, s in kills)

    workdir = a.keep or tempfile.mkdtemp(prefix="hpu-soak-")
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, "soak.yaml"), "w") as f:
        f.write(CONFIG.format(ranks=a.ranks, steps=a.steps))
    env = {"PATH": "/usr/bin:/bin", "HPU_LOG_LEVEL": "info", "HPU_PEER_TIMEOUT": "2s", "HPU_RESTART_BACKOFF": "100ms"}
    print(f"soak: {a.ranks} ranks, {a.steps} steps, a checkpoint every 100 steps, {len(kills)} kills "
          f"(about every {a.kill_every} steps), in {workdir}", flush=True)

    code, log, reference_s = run(a.bin, workdir, ["--trainer.logger.init_args.version=reference"], env)
    if code != 0:
        print(log[-4000:])
        print(f"soak: the undisturbed run failed with exit code {code}")
        return 1
    print(f"undisturbed run: {reference_s:.1f} s", flush=True)

    env["HPU_FAULT"] = fault
    code, log, elastic_s = run(a.bin, workdir, ["--trainer.logger.init_args.version=elastic",
                                                f"--trainer.max_restarts={len(kills) + 5}"], env)
    with open(os.path.join(workdir, "elastic.log"), "w") as f:
        f.write(log)
    backoffs = [float(v) / (1000 if unit == "ms" else 1) for v, unit in
                re.findall(r"restarting every rank from the newest checkpoint in ([0-9.]+)(ms|s) ", log)]
    restarts = len(backoffs)
    killed = len(re.findall(r"was killed by signal 9", log))
    if code != 0:
        print(log[-4000:])
        print(f"soak: the run with kills failed with exit code {code} after {restarts} restarts")
        return 1

    ref, ref_meta = tensors(os.path.join(workdir, "lightning_logs/reference/checkpoints/last.ckpt"))
    got, got_meta = tensors(os.path.join(workdir, "lightning_logs/elastic/checkpoints/last.ckpt"))
    same = ref == got and all(ref_meta[k] == got_meta[k] for k in ("global_step", "epoch", "optimizer"))
    lost = (elastic_s - reference_s) / max(restarts, 1)
    waited = sum(backoffs) / max(restarts, 1)
    print(f"run with kills: {elastic_s:.1f} s")
    print(f"steps completed: {got_meta['global_step']} of {a.steps}")
    print(f"ranks killed: {killed}, restarts: {restarts}")
    print(f"time lost per restart: {lost:.2f} s (the difference of the two runs' wall times / restarts), of which "
          f"{waited:.2f} s backoff (HPU_RESTART_BACKOFF={env['HPU_RESTART_BACKOFF']}, doubled after each round "
          f"shorter than a minute, at most 30 s) and {lost - waited:.2f} s teardown, start-up, rendezvous and the "
          f"steps redone since the newest checkpoint (50 on average, of the 100 between checkpoints)")
    print(f"final weights and optimizer state equal to the undisturbed run's, bit for bit: {'yes' if same else 'NO'}")
    if not a.keep:
        shutil.rmtree(workdir)
    return 0 if same and restarts == len(kills) and int(got_meta["global_step"]) == a.steps else 1


if __name__ == "__main__":
    sys.exit(main())
