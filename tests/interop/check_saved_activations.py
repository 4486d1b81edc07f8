"""PyTorch's count of the activations a Llama decoder layer keeps for backward.

Builds transformers' LlamaForCausalLM (SDPA attention) from the config in the
case file (argv[1]) with 1 and with 2 decoder layers, in each dtype asked for,
runs a training forward with labels on one sequence, and records every tensor
autograd saves (torch.autograd.graph.saved_tensors_hooks). A storage counts
once; parameters do not count. Prints JSON: per dtype, the bytes the second
layer adds, per token and per hidden unit.
"""
import json
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def saved_bytes(config, layers, dtype, tokens):
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**config, num_hidden_layers=layers, attn_implementation="sdpa")).to(dtype)
    model.train()
    ids = torch.randint(0, config["vocab_size"], (1, tokens))
    seen = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, labels=ids)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    return sum(n for ptr, n in seen.items() if ptr not in params)


def main():
    case = json.load(open(sys.argv[1]))
    config, tokens = case["config"], case["tokens"]
    out = {}
    for name in case["dtypes"]:
        dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}[name]
        per_layer = saved_bytes(config, 2, dtype, tokens) - saved_bytes(config, 1, dtype, tokens)
        out[name] = per_layer / tokens / config["hidden_size"]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
