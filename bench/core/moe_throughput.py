#!/usr/bin/env python3
"""Training tokens/s of a small Mixtral: hpu-train vs transformers' own MixtralForCausalLM
on PyTorch 2.13 eager.

The model: 4 layers, hidden 256, 4 heads, 8 experts of 512 with the top 2 routed per token,
byte vocabulary (256), sequences of 256 tokens, batch 8, AdamW (betas 0.9, 0.95, weight decay
0.1), fp32, on random tokens. transformers builds its MixtralForCausalLM from the same
MixtralConfig (its default attention, sdpa; its experts loop over the experts hit, as its
eager implementation does); hpu-train builds MixtralForCausalLM from the same sizes. Rounds
alternate (A B A B ...); each entry is a median of tokens/s with its min..max, the ratio is of
medians. hpu-train's rate is what ThroughputMonitor logs over the second half of a run of the
real CLI (hpu_bench.monitored_rate).

Run it with the benchmark environment's Python (scripts/install-deps.sh --bench):
  .venv/bench/bin/python bench/core/moe_throughput.py [--rounds 5] [--threads 2] [--steps 40] [--bin build/hpu-train]
"""
import argparse
import os
import statistics
import tempfile

import torch
import torch.nn.functional as F
import transformers

from hpu_bench import monitored_rate
from torch_yardstick import TorchTrainer, adamw, interleave, summary

SIZES = dict(vocab_size=256, hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=4, num_local_experts=8, num_experts_per_tok=2, max_position_embeddings=512)
SEQ, BATCH = 256, 8


class Logits(torch.nn.Module):
    """transformers' model as a function of the token ids to the logits."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids).logits


def torch_trainer():
    torch.manual_seed(0)
    model = Logits(transformers.MixtralForCausalLM(transformers.MixtralConfig(**SIZES)))
    model.train()
    data = torch.randint(0, SIZES["vocab_size"], (64, SEQ + 1))

    def batch_of(i):
        batch = data[(i * BATCH) % 56:][:BATCH]
        return batch[:, :-1], batch[:, 1:]

    def loss_fn(logits, targets):
        return F.cross_entropy(logits.reshape(-1, SIZES["vocab_size"]), targets.reshape(-1))

    opt = adamw(model.parameters(), betas=(0.9, 0.95), weight_decay=0.1)
    return TorchTrainer(model, opt, batch_of, loss_fn)


def hpu_rate(binary, steps, workdir, threads):
    """Tokens/s over the second half of a `steps`-step fit (hpu_bench.monitored_rate)."""
    sizes = ", ".join(f"{k}: {v}" for k, v in SIZES.items())
    config = os.path.join(workdir, "mixtral.yaml")
    with open(config, "w") as f:
        f.write(f"model:\n  class_path: MixtralForCausalLM\n  init_args: {{{sizes}}}\n"
                f"data:\n  class_path: RandomTokensDataModule\n"
                f"  init_args: {{vocab_size: {SIZES['vocab_size']}, block_size: {SEQ}, batch_size: {BATCH}, "
                f"num_samples: 4096}}\n")
    args = [binary, "fit", "--config", config, "--trainer.devices=1", f"--trainer.max_steps={steps}",
            "--trainer.limit_val_batches=0",
            "--trainer.num_sanity_val_steps=0", "--trainer.enable_checkpointing=false",
            "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false"]
    env = dict(os.environ, HPU_INTRA_OP_THREADS=str(threads))
    return monitored_rate(args, steps, workdir, env) * SEQ


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--bin", default="build/hpu-train")
    a = ap.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    binary = os.path.abspath(os.path.join(repo, a.bin)) if not os.path.isabs(a.bin) else a.bin
    torch.set_num_threads(a.threads)
    eager = torch_trainer()
    print(f"Mixtral {SIZES['num_hidden_layers']}x{SIZES['hidden_size']}, {SIZES['num_local_experts']} experts top "
          f"{SIZES['num_experts_per_tok']}, seq {SEQ}, batch {BATCH}; threads={a.threads} rounds={a.rounds} "
          f"torch={torch.__version__} transformers={transformers.__version__}", flush=True)
    with tempfile.TemporaryDirectory() as work:
        rates = interleave({"hpu-train": lambda: hpu_rate(binary, a.steps, work, a.threads),
                            "transformers eager": lambda: eager.steps_per_second(a.steps) * BATCH * SEQ},
                           a.rounds, lambda r, rates: print(
                               f"  round {r + 1}: " + ", ".join(f"{n} {v[-1]:.0f}" for n, v in rates.items()),
                               flush=True))
    for n, v in rates.items():
        print(f"{n:20} {summary(v)} tokens/s")
    print(f"hpu-train / transformers eager: "
          f"{statistics.median(rates['hpu-train']) / statistics.median(rates['transformers eager']):.2f}x")


if __name__ == "__main__":
    main()
