#!/usr/bin/env python3
"""Training tokens/s of a small Llama: hpu-train vs the same model in PyTorch 2.13.

The model is configs/llama_tiny_text.yaml's (4 layers, hidden 256, 4 heads,
SwiGLU 688, byte vocabulary), sequences of 256 tokens, batch 8, AdamW.
Rounds alternate (A B C ...): hpu-train, PyTorch eager, PyTorch with the model
under torch.compile; in fp32, then in bf16-mixed (bf16 autocast). Each entry is
a median of tokens/s with its min..max; ratios are of medians. --only threads
compares hpu-train on --threads intra-op threads with one thread instead
(fp32, alternating); --load N runs N busy loops beside every round.

hpu-train's steady-state rate is what ThroughputMonitor logs over the second
half of a run of the real CLI (hpu_bench.monitored_rate). PyTorch trains the
same architecture written as Hugging Face's eager Llama (RMSNorm, rotate-half
RoPE, softmax attention with a causal mask, SwiGLU), on random tokens, with
torch's fused AdamW and the same thread count (torch_yardstick.py).

Run it with the benchmark environment's Python (scripts/install-deps.sh --bench):
  .venv/bench/bin/python bench/core/lm_throughput.py [--rounds 5] [--threads 2] [--steps 80] [--bin build/hpu-train]
                                                     [--only fp32|bf16|threads] [--load N] [--json out.json]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

from hpu_bench import monitored_rate
from torch_yardstick import TorchTrainer, adamw, interleave, summary

HIDDEN, LAYERS, HEADS, FFN, VOCAB, SEQ, BATCH = 256, 4, 4, 688, 256, 256, 8


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(HIDDEN), RMSNorm(HIDDEN)
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(HIDDEN, HIDDEN, bias=False) for _ in range(4))
        self.gate_proj, self.up_proj = nn.Linear(HIDDEN, FFN, bias=False), nn.Linear(HIDDEN, FFN, bias=False)
        self.down_proj = nn.Linear(FFN, HIDDEN, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        h = self.input_layernorm(x)
        q, k, v = (p(h).view(b, t, HEADS, -1).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1)) + mask
        y = (torch.softmax(scores.float(), dim=-1).to(q.dtype) @ v).transpose(1, 2).reshape(b, t, HIDDEN)
        x = x + self.o_proj(y)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = RMSNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)
        d = HIDDEN // HEADS
        freqs = torch.outer(torch.arange(SEQ).float(), 10000.0 ** (-torch.arange(0, d, 2).float() / d))
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())
        self.register_buffer("mask", torch.full((SEQ, SEQ), float("-inf")).triu(1))

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x, self.cos, self.sin, self.mask)
        return self.lm_head(self.norm(x))


def torch_trainer(bf16, compiled):
    torch.manual_seed(0)
    model = Llama()
    data = torch.randint(0, VOCAB, (64, SEQ + 1))

    def batch_of(i):
        batch = data[(i * BATCH) % 56:][:BATCH]
        return batch[:, :-1], batch[:, 1:]

    def loss_fn(logits, targets):
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))

    opt = adamw(model.parameters(), betas=(0.9, 0.95), weight_decay=0.1)
    return TorchTrainer(model, opt, batch_of, loss_fn, bf16, compiled)


def hpu_rate(binary, precision, steps, workdir, threads):
    """Tokens/s over the second half of a `steps`-step fit (hpu_bench.monitored_rate)."""
    args = [binary, "fit", "--config", "configs/llama_tiny_text.yaml", f"--trainer.max_steps={steps}",
            "--trainer.limit_val_batches=0", "--trainer.num_sanity_val_steps=0",
            "--trainer.enable_checkpointing=false", "--trainer.enable_progress_bar=false",
            "--trainer.enable_model_summary=false", "--lr_scheduler=null", f"--trainer.precision={precision}",
            f"--model.vocab_size={VOCAB}", "--data=RandomTokensDataModule", f"--data.vocab_size={VOCAB}",
            f"--data.block_size={SEQ}",
            f"--data.batch_size={BATCH}", "--data.num_samples=4096"]
    env = dict(os.environ, HPU_INTRA_OP_THREADS=str(threads))
    return monitored_rate(args, steps, workdir, env) * SEQ


def compare(name, runs, rounds, against, results):
    """Interleaved rounds of `runs`; prints each median [min..max] and the ratios to `against`."""
    rates = interleave(runs, rounds, lambda r, rates: print(
        f"  {name} round {r + 1}: " + ", ".join(f"{n} {v[-1]:.0f}" for n, v in rates.items()), flush=True))
    med = {n: statistics.median(v) for n, v in rates.items()}
    for n, v in rates.items():
        ratio = "" if n == against else f"  ({against}: {med[against] / med[n]:.2f}x this)"
        print(f"{name}: {n:22} {summary(v)} tokens/s{ratio}", flush=True)
    results[name] = {"rates": rates, "ratios": {n: med[against] / med[n] for n in rates if n != against}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    # hpu-train's rate is over the second half of the run: past the step-level thread choice's
    # first probe (steps 17-25 run on one thread, step_tuner.h), which a 30-step run had in it.
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--bin", default="build/hpu-train")
    ap.add_argument("--only", choices=["fp32", "bf16", "threads"])
    ap.add_argument("--load", type=int, default=0, help="busy-looping processes to run beside the benchmark")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    binary = os.path.abspath(os.path.join(repo, a.bin)) if not os.path.isabs(a.bin) else a.bin
    torch.set_num_threads(a.threads)
    results = {}
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.load)]
    try:
        with tempfile.TemporaryDirectory() as work:
            os.symlink(os.path.join(repo, "configs"), os.path.join(work, "configs"))
            print(f"Llama {LAYERS}x{HIDDEN}, {HEADS} heads, seq {SEQ}, batch {BATCH}; threads={a.threads} "
                  f"rounds={a.rounds} load={a.load} torch={torch.__version__}", flush=True)
            for precision, bf16 in (("32-true", False), ("bf16-mixed", True)):
                if a.only not in (None, "bf16" if bf16 else "fp32"):
                    continue
                eager, compiled = torch_trainer(bf16, False), torch_trainer(bf16, True)
                compare(precision, {
                    "hpu-train": lambda: hpu_rate(binary, precision, a.steps, work, a.threads),
                    "torch eager": lambda: eager.steps_per_second(a.steps) * BATCH * SEQ,
                    "torch.compile": lambda: compiled.steps_per_second(a.steps) * BATCH * SEQ}, a.rounds,
                    "hpu-train", results)
            if a.only == "threads":
                compare("threads", {
                    f"hpu-train {a.threads} threads": lambda: hpu_rate(binary, "32-true", a.steps, work, a.threads),
                    "hpu-train 1 thread": lambda: hpu_rate(binary, "32-true", a.steps, work, 1)}, a.rounds,
                    f"hpu-train {a.threads} threads", results)
    finally:
        for b in burners:
            b.kill()
            b.wait()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
