#!/usr/bin/python3
"""`hpu-train estimate` against every LLM figure Intel publishes for Gaudi 2 that
hpu-train's strategies can run (Intel Gaudi "Model Performance Data" pages,
training and inference, software 1.18): estimate / published, whatever it is.

Nothing in the estimator is fitted to these numbers; they are the yardstick of
its time model. Intel does not publish the parallel settings of its training
runs: the ones below are ours (DeepSpeed ZeRO-2 on one or two servers, ZeRO-3
on eight; activation checkpointing per decoder layer; micro-batches that fit),
stated per row. The inference rows run on one card, as Intel's did, and the
2048-token generations decode in KV-cache buckets of 128 positions
(`bucket_size`), as optimum-habana's benchmark script for them does
(examples/text-generation/run_1x.sh: --bucket_size 128 --bucket_internal).
Llama 2 70B inference runs tensor-parallel on 2 and 4 cards, as Intel's did
(DeepSpeed inference; here ModelParallelStrategy, the same split).

    /usr/bin/python3 bench/estimate/published_gaudi2.py [--bin build/hpu-train] [--only SUBSTRING]

Prints a Markdown table and the geometric mean and range of the ratios. Each
estimate runs shape-only in this process's machine in seconds (the 2048-token
generations take longest).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = "configs/estimate/llama2_7b_train_8x_gaudi2_fp8.yaml"
INFER = "configs/estimate/llama2_7b_infer_1x_gaudi2_fp8.yaml"

# (model, config.json, vocabulary)
LLAMA2_7B = ("Llama 2 7B", "configs/estimate/llama2_7b.json", 32000)
LLAMA2_13B = ("Llama 2 13B", "configs/estimate/llama2_13b.json", 32000)
LLAMA2_70B = ("Llama 2 70B", "configs/estimate/llama2_70b.json", 32000)
LLAMA31_8B = ("Llama 3.1 8B", "configs/estimate/llama3_1_8b.json", 128256)
LLAMA31_70B = ("Llama 3.1 70B", "configs/estimate/llama3_1_70b.json", 128256)
MISTRAL_7B = ("Mistral 7B", "configs/estimate/mistral_7b.json", 32000)


def train(model, nodes, seq, strategy, micro, accumulation, published):
    """fp8 pre-training on `nodes` servers of 8 cards: global batch = micro x accumulation x 8 x nodes."""
    name, config, vocab = model
    world = 8 * nodes
    setting = (f"{world} cards, seq {seq}, global batch {micro * accumulation * world} "
               f"(ours: {strategy.replace('hpu_deepspeed_stage_', 'ZeRO-')}, micro {micro} x accumulation "
               f"{accumulation}, checkpointing)")
    args = ["fit", "-c", TRAIN, f"--trainer.num_nodes={nodes}", f"--trainer.strategy={strategy}",
            f"--trainer.accumulate_grad_batches={accumulation}", f"--model.init_args.config={config}",
            f"--data.init_args.vocab_size={vocab}", f"--data.init_args.block_size={seq}",
            f"--data.init_args.batch_size={micro}"]
    return {"kind": "training", "model": name, "setting": setting, "args": args, "published": published}


def infer(model, prompt, new, batch, published, cards=1):
    """fp8 inference: `batch` prompts of `prompt` tokens, `new` generated each, the model split
    tensor-parallel across `cards`."""
    name, config, vocab = model
    bucket = 128 if new >= 2048 else 0  # as run_1x.sh
    args = ["predict", "-c", INFER, f"--model.init_args.config={config}", f"--model.init_args.max_new_tokens={new}",
            f"--model.init_args.bucket_size={bucket}", f"--data.init_args.vocab_size={vocab}",
            f"--data.init_args.block_size={prompt}", f"--data.init_args.batch_size={batch}"]
    if cards > 1:
        args += [f"--trainer.devices={cards}", "--trainer.strategy=ModelParallelStrategy"]
    setting = (f"{cards} card{'s' if cards > 1 else ''}{', tensor-parallel' if cards > 1 else ''}, "
               f"{prompt} in / {new} out, batch {batch}" + (f" (bucket {bucket})" if bucket else ""))
    return {"kind": "inference", "model": name, "setting": setting, "args": args, "published": published}


ROWS = [
    train(LLAMA2_7B, 1, 4096, "hpu_deepspeed_stage_2", 2, 64, 68464),
    train(LLAMA2_13B, 2, 4096, "hpu_deepspeed_stage_2", 2, 8, 58282),
    train(LLAMA2_70B, 8, 4096, "hpu_deepspeed_stage_3", 1, 16, 54274),
    train(LLAMA31_8B, 1, 8192, "hpu_deepspeed_stage_2", 1, 16, 36309),
    train(LLAMA31_70B, 8, 8192, "hpu_deepspeed_stage_3", 1, 2, 43677),
    infer(LLAMA2_7B, 128, 128, 1230, 13137),
    infer(LLAMA2_7B, 128, 2048, 163, 4791),
    infer(LLAMA2_7B, 2048, 128, 94, 1449),
    infer(LLAMA2_7B, 2048, 2048, 81, 1953),
    infer(LLAMA2_70B, 128, 128, 1750, 2844, cards=2),
    infer(LLAMA2_70B, 128, 2048, 327, 3211, cards=4),
    infer(LLAMA2_70B, 2048, 128, 95, 310, cards=2),
    infer(LLAMA2_70B, 2048, 2048, 78, 1438, cards=2),
    infer(MISTRAL_7B, 128, 128, 896, 18023),
    infer(MISTRAL_7B, 128, 2048, 120, 11294),
    infer(MISTRAL_7B, 2048, 128, 120, 1427),
    infer(MISTRAL_7B, 2048, 2048, 44, 3947),
    infer(LLAMA31_8B, 128, 128, 2429, 18201),
    infer(LLAMA31_8B, 128, 2048, 289, 11138),
    infer(LLAMA31_8B, 2048, 128, 179, 2028),
    infer(LLAMA31_8B, 2048, 2048, 155, 5511),
]


def estimate(binary, row, workdir):
    out = os.path.join(workdir, "estimate.json")
    env = dict(os.environ, HPU_EMULATOR_GENERATION="gaudi2")
    began = time.monotonic()
    r = subprocess.run([binary, "estimate"] + row["args"] + ["--json", out], cwd=ROOT, env=env,
                       capture_output=True, text=True)
    if r.returncode not in (0, 1) or not os.path.exists(out):  # 1: runs, but does not fit
        sys.exit(f"{row['model']} {row['setting']}: exit {r.returncode}\n{r.stderr}")
    with open(out) as f:
        j = json.load(f)
    os.remove(out)
    return j, time.monotonic() - began


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "hpu-train"))
    p.add_argument("--only", default="", help="rows whose model or setting contains this")
    a = p.parse_args()
    ratios = []
    print("| run | setting | published tokens/s | estimate tokens/s | estimate / published | fits (peak) |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as workdir:
        for row in ROWS:
            if a.only and a.only not in row["model"] + " " + row["setting"]:
                continue
            j, seconds = estimate(os.path.abspath(a.bin), row, workdir)
            ratio = j["tokens_per_s"] / row["published"]
            ratios.append(ratio)
            peak = j["peak_device_memory_bytes"] / 2**30
            print(f"| {row['model']} {row['kind']} | {row['setting']} | {row['published']:,} | "
                  f"{j['tokens_per_s']:,.0f} | {ratio:.2f} | {'yes' if j['fits'] else 'NO'} ({peak:.1f} GiB) |",
                  flush=True)
            print(f"  ({row['model']}: estimated in {seconds:.1f} s)", file=sys.stderr)
    if ratios:
        mean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"\n{len(ratios)} runs: estimate / published geometric mean {mean:.2f}, "
              f"range {min(ratios):.2f} .. {max(ratios):.2f}")


if __name__ == "__main__":
    main()
