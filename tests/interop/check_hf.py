"""Judges hpu-train's Hugging Face files with the real libraries.

Run by tests/interop/hf_interop_test.cc with the interpreter of .venv/interop
(scripts/install-deps.sh --interop):

    check_hf.py CASE.json

CASE.json names what hpu-train wrote and what it computed:
    {"model_dir": ..., "input_ids": [[...]], "logits": [...flat...],
     "prompt": [...], "greedy": [...],
     "adapter_dir": ... or null, "adapter_logits": [...] or null,
     "tokenizer_texts": [...] or null, "tokenizer_ids": [[...]] or null}

transformers' from_pretrained must load model_dir as it is and give the same
logits (1e-5, relative above 1) and the same greedy continuation token for
token; peft's PeftModel.from_pretrained must load adapter_dir onto it and give
adapter_logits; AutoTokenizer must load model_dir's tokenizer and encode each
text to hpu-train's ids and decode them back. Prints what differs and exits 1.
"""
import json
import sys

import torch
import transformers
import peft


def compare(what, got, want, failures):
    got = torch.tensor(got, dtype=torch.float64).flatten()
    want = torch.tensor(want, dtype=torch.float64).flatten()
    if got.shape != want.shape:
        failures.append(f"{what}: {got.numel()} values, hpu-train has {want.numel()}")
        return
    tol = 1e-5 * torch.clamp(want.abs(), min=1.0)
    bad = ((got - want).abs() > tol).nonzero().flatten()
    worst = (got - want).abs().max().item() if got.numel() else 0.0
    print(f"{what}: {got.numel()} values, largest difference {worst:.3g}")
    if bad.numel():
        i = bad[0].item()
        failures.append(f"{what}: {bad.numel()} of {got.numel()} differ beyond 1e-5; first at {i}: "
                        f"{got[i].item()} vs hpu-train {want[i].item()}")


def main():
    case = json.load(open(sys.argv[1]))
    failures = []
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_pretrained(case["model_dir"], dtype=torch.float32)
    model.eval()
    ids = torch.tensor(case["input_ids"])
    with torch.no_grad():
        compare("logits", model(input_ids=ids).logits, case["logits"], failures)
        prompt = torch.tensor([case["prompt"]])
        out = model.generate(prompt, max_new_tokens=len(case["greedy"]), do_sample=False, num_beams=1,
                             attention_mask=torch.ones_like(prompt), pad_token_id=0,
                             eos_token_id=None)
        greedy = out[0, prompt.shape[1]:].tolist()
        print(f"greedy: transformers {greedy}, hpu-train {case['greedy']}")
        if greedy != case["greedy"]:
            failures.append(f"greedy continuation: transformers {greedy}, hpu-train {case['greedy']}")
        if case.get("adapter_dir"):
            adapted = peft.PeftModel.from_pretrained(model, case["adapter_dir"])
            adapted.eval()
            compare("adapter logits", adapted(input_ids=ids).logits, case["adapter_logits"], failures)
    if case.get("tokenizer_texts"):
        tok = transformers.AutoTokenizer.from_pretrained(case["model_dir"])
        for text, want in zip(case["tokenizer_texts"], case["tokenizer_ids"]):
            got = tok.encode(text, add_special_tokens=False)
            if got != want:
                failures.append(f"tokenizer: {text!r} encodes to {got[:20]}..., hpu-train {want[:20]}...")
            elif tok.decode(got) != text:
                failures.append(f"tokenizer: {text!r} decodes back to {tok.decode(got)!r}")
        print(f"tokenizer: {len(case['tokenizer_texts'])} texts checked")
    for f in failures:
        print("FAIL", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
