"""Tiny random models of every family hpu-train builds, made and saved by
transformers itself, with what transformers computes on them.

Run by tests/interop/hf_interop_test.cc with the interpreter of .venv/interop:

    make_family_models.py OUT_DIR

For each family F, OUT_DIR/F is the directory save_pretrained writes (the
config.json keys and tensor names of the transformers release the venv pins)
and OUT_DIR/F/reference.json holds:
    {"input_ids": [[...], [...]], "logits": [...flat...],
     "prompt": [...], "greedy": [...],
     "loss": float, "grads": {name: [...flat...]}}
the logits of input_ids, the greedy continuation of prompt, and the loss of
input_ids as labels (transformers shifts them; Mixtral's includes the
load-balancing loss) with the gradient of every parameter under its
save_pretrained name.
"""
import json
import os
import sys

import torch
import transformers

IDS = [[3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8], [9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4]]
PROMPT = [7, 3, 9, 1]
COMMON = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_attention_heads=4, initializer_range=0.2,
              bos_token_id=1, eos_token_id=None, pad_token_id=None)

FAMILIES = {
    # transformers 5's rope_parameters with Llama 3's scaling.
    "llama": transformers.LlamaConfig(**COMMON, num_hidden_layers=2, num_key_value_heads=2,
                                      rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                                       "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                       "original_max_position_embeddings": 8}),
    "mistral": transformers.MistralConfig(**COMMON, num_hidden_layers=2, num_key_value_heads=2, sliding_window=4),
    # Tied embeddings, biases on q, k, v, a window on the layers from 1 on.
    "qwen2": transformers.Qwen2Config(**COMMON, num_hidden_layers=2, num_key_value_heads=2, tie_word_embeddings=True,
                                      use_sliding_window=True, sliding_window=4, max_window_layers=1),
    # head_dim 16, not hidden / heads = 8; one key/value head.
    "gemma": transformers.GemmaConfig(**COMMON, num_hidden_layers=2, num_key_value_heads=1, head_dim=16),
    # Caps small enough to bend the scores and logits of these weights.
    "gemma2": transformers.Gemma2Config(**COMMON, num_hidden_layers=3, num_key_value_heads=2, head_dim=16,
                                        sliding_window=4, query_pre_attn_scalar=24, attn_logit_softcapping=2.0,
                                        final_logit_softcapping=3.0),
    "phi3": transformers.Phi3Config(**COMMON, num_hidden_layers=2, num_key_value_heads=2),
    "mixtral": transformers.MixtralConfig(**COMMON, num_hidden_layers=2, num_key_value_heads=2, num_local_experts=4,
                                          num_experts_per_tok=2, output_router_logits=True, router_aux_loss_coef=0.1),
}


def main():
    out = sys.argv[1]
    only = sys.argv[2:]
    for name, config in FAMILIES.items():
        if only and name not in only:
            continue
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
        model.eval()
        directory = os.path.join(out, name)
        model.save_pretrained(directory)
        ids = torch.tensor(IDS)
        with torch.no_grad():
            logits = model(input_ids=ids).logits
            prompt = torch.tensor([PROMPT])
            generated = model.generate(prompt, max_new_tokens=8, do_sample=False, num_beams=1,
                                       attention_mask=torch.ones_like(prompt), pad_token_id=0, eos_token_id=None)
        model.train()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        # Gradients under the names save_pretrained wrote (Mixtral's experts as w1 / w2 / w3).
        grads = {}
        for pname, p in model.named_parameters():
            g = p.grad
            if ".mlp.experts.gate_up_proj" in pname:  # [E, 2I, H]: w1 (gate) rows, then w3 (up)
                prefix = pname.replace(".mlp.experts.gate_up_proj", ".block_sparse_moe.experts")
                half = g.shape[1] // 2
                for e in range(g.shape[0]):
                    grads[f"{prefix}.{e}.w1.weight"] = g[e, :half].flatten().tolist()
                    grads[f"{prefix}.{e}.w3.weight"] = g[e, half:].flatten().tolist()
            elif ".mlp.experts.down_proj" in pname:  # [E, H, I]
                prefix = pname.replace(".mlp.experts.down_proj", ".block_sparse_moe.experts")
                for e in range(g.shape[0]):
                    grads[f"{prefix}.{e}.w2.weight"] = g[e].flatten().tolist()
            else:
                grads[pname.replace(".mlp.gate.", ".block_sparse_moe.gate.")] = g.flatten().tolist()
        reference = {"input_ids": IDS, "logits": logits.flatten().tolist(), "prompt": PROMPT,
                     "greedy": generated[0, len(PROMPT):].tolist(), "loss": loss.item(), "grads": grads}
        with open(os.path.join(directory, "reference.json"), "w") as f:
            json.dump(reference, f)
        print(f"{name}: {sum(p.numel() for p in model.parameters())} parameters, loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
