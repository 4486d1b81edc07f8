#!/usr/bin/env python3
"""Training tokens/s of a small Llama: hpu-train vs the same model in plain PyTorch.

The model is configs/llama_tiny_text.yaml's (4 layers, hidden 256, 4 heads,
SwiGLU 688, byte vocabulary), sequences of 256 tokens, batch 8, AdamW.
Rounds alternate (A B C D ...): hpu-train fp32, hpu-train bf16-mixed,
PyTorch fp32, PyTorch bf16 autocast. Each entry is a median of tokens/s with
its min..max; ratios are of medians.

hpu-train's steady-state rate is what ThroughputMonitor logs over the second
half of a run of the real CLI (hpu_bench.monitored_rate). PyTorch trains the
same architecture written as Hugging Face's eager Llama (RMSNorm, rotate-half
RoPE, softmax attention with a causal mask, SwiGLU), on random tokens, with
the same thread count.

Usage: bench/core/lm_throughput.py [--rounds 5] [--threads 2] [--bin build/hpu-train] [--json out.json]
"""
import argparse
import json
import math
import os
import statistics
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

from hpu_bench import monitored_rate, steps_per_second

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


def torch_rate(steps, bf16):
    torch.manual_seed(0)
    model = Llama()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    data = torch.randint(0, VOCAB, (64, SEQ + 1))

    def step(i):
        batch = data[(i * BATCH) % 56:][:BATCH]
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
        loss.backward()
        opt.step()

    return steps_per_second(step, steps, 3) * BATCH * SEQ


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--bin", default="build/hpu-train")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    binary = os.path.abspath(os.path.join(repo, a.bin)) if not os.path.isabs(a.bin) else a.bin
    torch.set_num_threads(a.threads)
    cases = {
        "hpu-train fp32": lambda work: hpu_rate(binary, "32-true", a.steps, work, a.threads),
        "hpu-train bf16-mixed": lambda work: hpu_rate(binary, "bf16-mixed", a.steps, work, a.threads),
        "torch fp32": lambda work: torch_rate(a.steps, False),
        "torch bf16 autocast": lambda work: torch_rate(a.steps, True),
    }
    rates = {name: [] for name in cases}
    with tempfile.TemporaryDirectory() as work:
        os.symlink(os.path.join(repo, "configs"), os.path.join(work, "configs"))
        print(f"Llama {LAYERS}x{HIDDEN}, {HEADS} heads, seq {SEQ}, batch {BATCH}; threads={a.threads} "
              f"rounds={a.rounds} torch={torch.__version__}", flush=True)
        for r in range(a.rounds):  # A B C D A B C D ...
            for name, rate in cases.items():
                rates[name].append(rate(work))
            print(f"round {r + 1}: " + ", ".join(f"{n} {v[-1]:.0f}" for n, v in rates.items()), flush=True)
    med = {n: statistics.median(v) for n, v in rates.items()}
    for n, v in rates.items():
        print(f"  {n:22} {med[n]:8.0f} tokens/s [{min(v):.0f}..{max(v):.0f}]")
    ratios = {
        "hpu-train fp32 / torch fp32": med["hpu-train fp32"] / med["torch fp32"],
        "hpu-train bf16-mixed / hpu-train fp32": med["hpu-train bf16-mixed"] / med["hpu-train fp32"],
        "hpu-train bf16-mixed / torch bf16 autocast": med["hpu-train bf16-mixed"] / med["torch bf16 autocast"],
    }
    for n, v in ratios.items():
        print(f"  {n:44} {v:.2f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rates": rates, "ratios": ratios}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
