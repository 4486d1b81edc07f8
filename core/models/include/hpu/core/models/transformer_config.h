// The architecture of a decoder-only transformer, as Hugging Face's
// LlamaConfig / MistralConfig / GPT2Config describe it, resolved from a
// model's init_args and an optional config.json: an init_arg that is set
// wins, then the file's key, then the family's default (LlamaConfig's and
// GPT2Config's own defaults).
//
// config.json keys are read by table: a key hpu-train implements sets its
// field; a key that cannot change the math (torch_dtype, architectures,
// generation settings, ...) is ignored; a key that would change the
// architecture in a way hpu-train does not implement (a rope_scaling other
// than linear or llama3, another hidden_act, ...) or that it does not know is
// refused by name (UsageError).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "hpu/core/config/params.h"
#include "hpu/core/ops/ops.h"

namespace hpu::core::models {

enum class Family { kLlama, kGpt2 };

struct TransformerConfig {
  Family family = Family::kLlama;
  std::string model_type;       // "llama", "mistral", "gpt2"
  std::int64_t vocab_size = 0;  // 0: not set (the model takes its data's tokenizer's)
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t num_hidden_layers = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t num_key_value_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t max_position_embeddings = 0;
  double norm_eps = 1e-6;       // rms_norm_eps (Llama), layer_norm_epsilon (GPT-2)
  double rope_theta = 10000.0;  // Llama
  ops::RopeScaling rope_scaling;  // Llama 3's rope_scaling
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // Llama (GPT-2's projections always have biases)
  bool mlp_bias = false;
  std::int64_t sliding_window = 0;  // Mistral; 0: none
  float attention_dropout = 0.0f;   // attention_dropout (Llama), attn_pdrop (GPT-2)
  float resid_dropout = 0.0f;       // GPT-2's resid_pdrop
  float embd_dropout = 0.0f;        // GPT-2's embd_pdrop
  std::string activation;           // GPT-2's activation_function: gelu_new, gelu, relu, silu
  double initializer_range = 0.02;
  std::optional<std::int64_t> pad_token_id, eos_token_id;
  // init_args' attn_implementation (transformers' name): "eager" materialises
  // the attention scores (ops::AttentionOptions::eager); "sdpa" fuses them.
  bool eager_attention = false;
  // init_args' gradient_checkpointing: selective: in training, the attention
  // core is recomputed in backward instead of keeping its output
  // (nn::attentionCore).
  bool recompute_attention = false;
};

// The architecture from init_args (Optional[...] keys, null when not given)
// and init_args' "config" (a config.json path, or null). Throws UsageError
// naming the file and key, or the init_arg, for what it cannot build.
TransformerConfig resolveTransformerConfig(Family family, const config::Params& init_args);

}  // namespace hpu::core::models
