#!/usr/bin/python3
"""Intel's published LLM figures for Gaudi 2 and Gaudi 3 that hpu-train's strategies can
run (Intel Gaudi "Model Performance Data" pages, software 1.18, PyTorch 2.4), and how to
estimate each: the rows `calibrate.py` fits the model's efficiencies on and validates it
against.

- Gaudi 2 training (fp8 pre-training, tokens/s), in the layouts of Intel's Megatron-DeepSpeed
  recipes for them (HabanaAI/Megatron-DeepSpeed, README.md "Multi-Card Training Examples", the
  fp8 commands; scripts/run_llama.sh for what they leave at its defaults: sequence parallelism
  on, the fused attention): tensor x pipeline x data parallel (ModelParallelStrategy), ZeRO-1,
  the recipe's micro-batch, selective recompute (HL_CKP_ACT=2, hpu-train's
  gradient_checkpointing: selective) or none (HL_CKP_ACT=0), stated per row; the global batch is
  the published row's.
- Gaudi 2 and Gaudi 3 inference throughput (fp8, generated tokens/s), on one card or split
  tensor-parallel as Intel's DeepSpeed-inference runs were (here ModelParallelStrategy, the
  same split). Every generation runs as Intel's benchmark for these pages runs optimum-habana
  (HabanaAI/Gaudi-tutorials, PyTorch/Hugging_Face_pipelines/Benchmarking_on_Optimum-habana_with_fp8,
  the command of every row in Gaudi_1-19.json): --bucket_size=128 --bucket_internal without
  --reuse_cache, so decoding attends to the KV cache in buckets of 128 positions and the prompt's
  forward holds the prompt's rows only, the cache padded to its whole length after it (hpu-train's
  bucket_size: 128 and reuse_cache: false); --trim_logits, --use_flash_attention with its causal
  mask, --attn_softmax_bf16, fp8 by Intel Neural Compressor's maxabs quantization.
- Mistral 7B's rows run as Intel's commands for them do (their "Replicating Large Language Model
  Inference Performance" page for software 1.16 gives them; the 1.18 pages repeat its batch
  sizes): without --use_flash_attention, so attention materialises its scores (hpu-train's
  attn_implementation: eager), with --reuse_cache, and with buckets of 128 on the 2048-token
  generations only.
- Gaudi 2 latency at batch 1 (ms). Intel's table gives the input length and no output
  length: we read it as the time to the first token (the prompt's prefill and its first
  generated token), which the estimate prices as a predict of one new token.

- Held out: the runs of Intel's benchmark for software 1.19 (Gaudi_1-19.json above: each row's
  command and figure), which no fit sees. Some repeat a 1.18 row at a new batch; Llama 3.1 70B on
  Gaudi 2 and Llama 3.1 405B on 8 Gaudi 3 are models the fit has not seen on that generation.

    /usr/bin/python3 bench/estimate/published.py [--bin build/hpu-train] [--only SUBSTRING] [--held-out]

prints every row's estimate / published under the model's current calibration (see
calibrate.py for the fit and the leave-one-out table); --held-out, the held-out rows'.
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
LLAMA31_405B = ("Llama 3.1 405B", "configs/estimate/llama3_1_405b.json", 128256)


def train(model, nodes, seq, batch, published, tp=1, pp=1, micro=1, recompute="selective", generation="gaudi2"):
    """fp8 pre-training on `nodes` servers of 8 cards, a global batch of `batch` sequences: `tp`
    tensor-parallel (with sequence parallelism) x `pp` pipeline stages x the rest data-parallel
    with ZeRO-1, micro-batches of `micro`; `recompute`: gradient_checkpointing's value."""
    name, config, vocab = model
    world = 8 * nodes
    dp = world // (tp * pp)
    accumulation = batch // (micro * dp)
    assert micro * dp * accumulation == batch, (name, batch)
    setting = (f"{world} cards, seq {seq}, global batch {batch} (TP{tp} x PP{pp} x DP{dp}, ZeRO-1, micro {micro}, "
               f"{'selective recompute' if recompute == 'selective' else 'no recompute'})")
    args = ["fit", "-c", TRAIN, f"--trainer.num_nodes={nodes}", "--trainer.strategy=ModelParallelStrategy",
            f"--trainer.strategy.init_args.tensor_parallel_size={tp}",
            f"--trainer.strategy.init_args.pipeline_parallel_size={pp}",
            f"--trainer.strategy.init_args.data_parallel_size={dp}",
            f"--trainer.strategy.init_args.sequence_parallel={str(tp > 1).lower()}",
            "--trainer.strategy.init_args.zero_stage=1", f"--trainer.accumulate_grad_batches={accumulation}",
            f"--model.init_args.config={config}", f"--model.init_args.gradient_checkpointing={recompute}",
            f"--data.init_args.vocab_size={vocab}", f"--data.init_args.block_size={seq}",
            f"--data.init_args.batch_size={micro}"]
    return {"kind": "training", "model": name, "setting": setting, "args": args, "published": published,
            "unit": "tokens/s", "generation": generation, "tokens_in": seq, "tokens_out": 0,
            "batch": batch, "cards": world}


def infer(model, prompt, new, batch, published, cards=1, generation="gaudi2", bucket=128, reuse_cache=False,
          eager=False):
    """fp8 inference: `batch` prompts of `prompt` tokens, `new` generated each, the model split
    tensor-parallel across `cards`; optimum-habana's --bucket_size (0: none), --reuse_cache, and
    attention without --use_flash_attention (`eager`)."""
    name, config, vocab = model
    args = ["predict", "-c", INFER, f"--model.init_args.config={config}", f"--model.init_args.max_new_tokens={new}",
            f"--model.init_args.bucket_size={bucket}", f"--model.init_args.reuse_cache={str(reuse_cache).lower()}",
            f"--model.init_args.attn_implementation={'eager' if eager else 'sdpa'}",
            f"--data.init_args.vocab_size={vocab}", f"--data.init_args.block_size={prompt}",
            f"--data.init_args.batch_size={batch}"]
    if cards > 1:
        # DeepSpeed-inference splits the Hugging Face model as it is: no vocabulary padding.
        args += [f"--trainer.devices={cards}", "--trainer.strategy=ModelParallelStrategy",
                 "--model.init_args.make_vocab_size_divisible_by=1"]
    setting = (f"{cards} card{'s' if cards > 1 else ''}{', tensor-parallel' if cards > 1 else ''}, "
               f"{prompt} in / {new} out, batch {batch}")
    return {"kind": "inference", "model": name, "setting": setting, "args": args, "published": published,
            "unit": "tokens/s", "generation": generation, "tokens_in": prompt, "tokens_out": new, "batch": batch,
            "cards": cards}


def mistral(prompt, new, batch, published):
    """Mistral 7B as Intel's commands for its rows run optimum-habana (their "Replicating Large
    Language Model Inference Performance" page, software 1.16, the batch sizes the 1.18 pages
    repeat): without --use_flash_attention, with --reuse_cache, buckets of 128 only for the
    2048-token generations."""
    return infer(MISTRAL_7B, prompt, new, batch, published, bucket=128 if new == 2048 else 0, reuse_cache=True,
                 eager=True)


def latency(model, prompt, published_ms, cards=1, generation="gaudi2"):
    """fp8 time to the first token of one prompt of `prompt` tokens, in ms."""
    row = infer(model, prompt, 1, 1, 0, cards, generation)
    row.update(kind="latency", published=published_ms, unit="ms",
               setting=f"{cards} card{'s' if cards > 1 else ''}, {prompt} in, batch 1, first token")
    return row


def gaudi3(row):
    row["generation"] = "gaudi3"
    return row


ROWS = [
    # Gaudi 2 training
    # (Intel's recipe for Llama 2 70B is on 32 cards, TP8 x PP4; on 64, two copies of it.)
    train(LLAMA2_7B, 1, 4096, 1024, 68464),
    train(LLAMA2_13B, 2, 4096, 256, 58282, tp=2, pp=2, micro=2),
    train(LLAMA2_70B, 8, 4096, 1024, 54274, tp=8, pp=4, recompute="false"),
    train(LLAMA31_8B, 1, 8192, 128, 36309, tp=4),
    train(LLAMA31_70B, 8, 8192, 128, 43677, tp=8),
    # Gaudi 2 inference throughput
    infer(LLAMA2_7B, 128, 128, 1230, 13137),
    infer(LLAMA2_7B, 128, 2048, 163, 4791),
    infer(LLAMA2_7B, 2048, 128, 94, 1449),
    infer(LLAMA2_7B, 2048, 2048, 81, 1953),
    infer(LLAMA2_70B, 128, 128, 1750, 2844, cards=2),
    # The page says 4 cards; Intel's benchmark for the page (Gaudi_1-19.json, above) runs this
    # row, batch 327 of 128 in / 2048 out, on 2 (world_size 2; 3,312 tokens/s under 1.19).
    infer(LLAMA2_70B, 128, 2048, 327, 3211, cards=2),
    infer(LLAMA2_70B, 2048, 128, 95, 310, cards=2),
    infer(LLAMA2_70B, 2048, 2048, 78, 1438, cards=2),
    mistral(128, 128, 896, 18023),
    mistral(128, 2048, 120, 11294),
    mistral(2048, 128, 120, 1427),
    mistral(2048, 2048, 44, 3947),
    infer(LLAMA31_8B, 128, 128, 2429, 18201),
    infer(LLAMA31_8B, 128, 2048, 289, 11138),
    infer(LLAMA31_8B, 2048, 128, 179, 2028),
    infer(LLAMA31_8B, 2048, 2048, 155, 5511),
    # Gaudi 2 latency
    latency(LLAMA2_7B, 128, 7.62),
    latency(LLAMA2_7B, 2048, 56.31),
    latency(LLAMA2_70B, 128, 26.93, cards=8),
    latency(LLAMA2_70B, 2048, 116, cards=8),
    latency(LLAMA31_8B, 128, 8.17),
    latency(LLAMA31_8B, 2048, 60.52),
    # Gaudi 3 inference throughput (model-performance.html)
    gaudi3(infer(LLAMA2_7B, 128, 128, 1536, 19810)),
    gaudi3(infer(LLAMA2_7B, 128, 2048, 217, 6763)),
    gaudi3(infer(LLAMA2_7B, 2048, 128, 153, 2029)),
    gaudi3(infer(LLAMA2_7B, 2048, 2048, 75, 2734)),
    gaudi3(infer(LLAMA2_70B, 128, 128, 1750, 4433, cards=2)),
    gaudi3(infer(LLAMA2_70B, 128, 2048, 512, 6026, cards=2)),
    gaudi3(infer(LLAMA2_70B, 2048, 128, 231, 498, cards=2)),
    gaudi3(infer(LLAMA2_70B, 2048, 2048, 240, 2641, cards=2)),
    gaudi3(infer(LLAMA31_8B, 128, 128, 1536, 24310)),
    gaudi3(infer(LLAMA31_8B, 128, 2048, 768, 18830)),
    gaudi3(infer(LLAMA31_8B, 2048, 128, 256, 2652)),
    gaudi3(infer(LLAMA31_8B, 2048, 2048, 364, 7405)),
    gaudi3(infer(LLAMA31_70B, 128, 128, 3516, 3711, cards=2)),
    gaudi3(infer(LLAMA31_70B, 128, 2048, 450, 5776, cards=2)),
    gaudi3(infer(LLAMA31_70B, 2048, 128, 223, 497, cards=2)),
    gaudi3(infer(LLAMA31_70B, 2048, 2048, 175, 2588, cards=2)),
    gaudi3(infer(LLAMA31_70B, 128, 128, 4000, 15008, cards=8)),
    gaudi3(infer(LLAMA31_70B, 128, 2048, 600, 15711, cards=8)),
    gaudi3(infer(LLAMA31_70B, 2048, 128, 400, 1600, cards=8)),
    gaudi3(infer(LLAMA31_70B, 2048, 2048, 600, 8946, cards=8)),
    gaudi3(mistral(128, 128, 896, 24433)),
    gaudi3(mistral(128, 2048, 120, 13726)),
    gaudi3(mistral(2048, 128, 120, 2085)),
    gaudi3(mistral(2048, 2048, 44, 4970)),
]


# Intel's benchmark runs for software 1.19 (Gaudi_1-19.json), Gaudi 3 then Gaudi 2: held out of
# every fit. Llama 3.1 405B's --book_source only changes how its weights load.
HELD_OUT = [gaudi3(r) for r in [
    infer(LLAMA2_70B, 128, 128, 1750, 4562, cards=2),
    infer(LLAMA2_70B, 128, 2048, 512, 6590, cards=2),
    infer(LLAMA2_70B, 2048, 128, 242, 486, cards=2),
    infer(LLAMA2_70B, 2048, 2048, 241, 2736, cards=2),
    infer(LLAMA31_8B, 128, 128, 1536, 24364),
    infer(LLAMA31_8B, 128, 2048, 768, 18063),
    infer(LLAMA31_8B, 2048, 128, 256, 2590),
    infer(LLAMA31_8B, 2048, 2048, 371, 8335),
    infer(LLAMA31_70B, 128, 128, 2048, 4562, cards=2),
    infer(LLAMA31_70B, 128, 2048, 450, 6278, cards=2),
    infer(LLAMA31_70B, 2048, 128, 223, 449, cards=2),
    infer(LLAMA31_70B, 2048, 2048, 175, 2796, cards=2),
    infer(LLAMA31_70B, 128, 128, 4000, 15377, cards=8),
    infer(LLAMA31_70B, 128, 2048, 768, 16891, cards=8),
    infer(LLAMA31_70B, 2048, 128, 512, 1594, cards=8),
    infer(LLAMA31_70B, 2048, 2048, 600, 9467, cards=8),
    infer(LLAMA31_405B, 128, 128, 2996, 3306, cards=8),
    infer(LLAMA31_405B, 128, 2048, 460, 4793, cards=8),
    infer(LLAMA31_405B, 2048, 128, 195, 371, cards=8),
    infer(LLAMA31_405B, 2048, 2048, 180, 2143, cards=8),
]] + [
    infer(LLAMA2_70B, 128, 128, 1750, 2943, cards=2),
    infer(LLAMA2_70B, 128, 2048, 327, 3312, cards=2),
    infer(LLAMA2_70B, 2048, 128, 95, 316, cards=2),
    infer(LLAMA2_70B, 2048, 2048, 159, 1755, cards=2),
    infer(LLAMA31_8B, 128, 128, 2816, 19875),
    infer(LLAMA31_8B, 128, 2048, 512, 14784),
    infer(LLAMA31_8B, 2048, 128, 179, 2011),
    infer(LLAMA31_8B, 2048, 2048, 256, 6083),
    infer(LLAMA31_70B, 128, 128, 1792, 2895, cards=2),
    infer(LLAMA31_70B, 128, 2048, 256, 3816, cards=2),
    infer(LLAMA31_70B, 2048, 128, 142, 316, cards=2),
    infer(LLAMA31_70B, 2048, 2048, 139, 1648, cards=2),
    infer(LLAMA31_70B, 128, 128, 4000, 10012, cards=8),
    infer(LLAMA31_70B, 128, 2048, 600, 12538, cards=8),
    infer(LLAMA31_70B, 2048, 128, 383, 1083, cards=8),
    infer(LLAMA31_70B, 2048, 2048, 476, 6623, cards=8),
]


def speed(row, j):
    """The estimate's figure for `row` in its unit (tokens/s, or ms of latency)."""
    return j["step_time_s"] * 1e3 if row["unit"] == "ms" else j["tokens_per_s"]


def ratio(row, value):
    """estimate / published as speed: above 1 the estimate is optimistic (faster than measured)."""
    return row["published"] / value if row["unit"] == "ms" else value / row["published"]


def estimate(binary, row, workdir):
    """Runs `hpu-train estimate` on `row`: its JSON report and how long it took."""
    out = os.path.join(workdir, f"estimate-{os.getpid()}-{id(row)}.json")
    env = dict(os.environ, HPU_EMULATOR_GENERATION=row["generation"])
    began = time.monotonic()
    r = subprocess.run([binary, "estimate"] + row["args"] + ["--json", out], cwd=ROOT, env=env,
                       capture_output=True, text=True)
    if r.returncode not in (0, 1) or not os.path.exists(out):  # 1: runs, but does not fit
        sys.exit(f"{row['model']} {row['setting']}: exit {r.returncode}\n{r.stderr}")
    with open(out) as f:
        j = json.load(f)
    os.remove(out)
    return j, time.monotonic() - began


def estimate_all(binary, rows, jobs=2):
    """estimate() of every row, `jobs` at a time, in the rows' order."""
    from concurrent.futures import ThreadPoolExecutor
    with tempfile.TemporaryDirectory() as workdir, ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(lambda row: estimate(binary, row, workdir), rows))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "hpu-train"))
    p.add_argument("--only", default="", help="rows whose generation, model or setting contains this")
    p.add_argument("--held-out", action="store_true", help="the software 1.19 runs no fit sees")
    a = p.parse_args()
    rows = [r for r in (HELD_OUT if a.held_out else ROWS) if a.only in f"{r['generation']} {r['model']} {r['setting']}"]
    ratios = []
    print("| gen | run | setting | published | estimate | estimate / published | fits (peak) |")
    print("|---|---|---|---|---|---|---|")
    for row, (j, seconds) in zip(rows, estimate_all(os.path.abspath(a.bin), rows)):
        value = speed(row, j)
        r = ratio(row, value)
        ratios.append(r)
        peak = j["peak_device_memory_bytes"] / 2**30
        print(f"| {row['generation']} | {row['model']} {row['kind']} | {row['setting']} | {row['published']:,} "
              f"{row['unit']} | {value:,.1f} | {r:.2f} | {'yes' if j['fits'] else 'NO'} ({peak:.1f} GiB) |",
              flush=True)
    if ratios:
        mean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"\n{len(ratios)} runs: estimate / published geometric mean {mean:.2f}, "
              f"range {min(ratios):.2f} .. {max(ratios):.2f}")


if __name__ == "__main__":
    main()
