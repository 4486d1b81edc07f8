// The architecture of a decoder-only transformer, as Hugging Face's configs
// describe it (LlamaConfig, MistralConfig, Qwen2Config, GemmaConfig,
// Gemma2Config, Phi3Config, MixtralConfig, GPT2Config), resolved from a
// model's init_args and an optional config.json: an init_arg that is set
// wins, then the file's key, then the family's default (its config class's
// own defaults in transformers 5).
//
// config.json is read in both of the generations transformers writes:
// transformers 4 (torch_dtype, rope_theta, rope_scaling) and 5 (dtype,
// rope_parameters, layer_types). Keys are read by table: a key hpu-train
// implements sets its field; a key that cannot change the math (dtype,
// architectures, generation settings, ...) is ignored; a key that would
// change the architecture in a way hpu-train does not implement (another
// rope type, another activation, ...) or that it does not know is refused
// by name (UsageError).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hpu/core/config/params.h"
#include "hpu/core/ops/ops.h"

namespace hpu::core::models {

// The Hugging Face model classes hpu-train builds; Mistral is a Llama
// (LlamaForCausalLM builds both, model_type tells them apart).
enum class Family { kLlama, kQwen2, kGemma, kGemma2, kPhi3, kMixtral, kGpt2 };

struct FamilyInfo {
  Family family;
  const char* model_class;      // "Qwen2ForCausalLM": the registered model and config.json's architectures
  const char* model_types;      // the config.json model_type values it builds, comma-separated
  const char* config_class;     // "Qwen2Config", for messages
  const char* module_prefix;    // "Qwen2": its modules' type names (Qwen2Attention, Qwen2MLP, ...)
  std::int64_t vocab_size;      // its config class's default, for a model with neither config.json nor tokenizer
};
const FamilyInfo& familyInfo(Family family);
// The family that builds config.json's `model_type`, or null.
const FamilyInfo* familyOfModelType(const std::string& model_type);
// "llama, mistral, qwen2, ..." for messages.
std::string supportedModelTypes();

struct TransformerConfig {
  Family family = Family::kLlama;
  std::string model_type;       // "llama", "mistral", "qwen2", "gemma", "gemma2", "phi3", "mixtral", "gpt2"
  std::int64_t vocab_size = 0;  // 0: not set (the model takes its data's tokenizer's)
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t num_hidden_layers = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t num_key_value_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t max_position_embeddings = 0;
  double norm_eps = 1e-6;       // rms_norm_eps, GPT-2's layer_norm_epsilon
  double rope_theta = 10000.0;
  ops::RopeScaling rope_scaling;  // rope_parameters' (rope_scaling's) rescaling
  bool tie_word_embeddings = false;
  bool qkv_bias = false;          // biases of q, k, v (Llama's attention_bias; always on Qwen2)
  bool output_bias = false;       // of o_proj (Llama's attention_bias; never on Qwen2)
  bool mlp_bias = false;
  std::string hidden_act = "silu";  // the gated MLP's: silu, gelu, or gelu_pytorch_tanh (Gemma's GeGLU)
  std::int64_t sliding_window = 0;  // 0: none
  // Per decoder layer: whether it attends through the sliding window
  // (layer_types' "sliding_attention"); empty: every layer, when
  // sliding_window is set.
  std::vector<bool> sliding_layers;
  float attention_dropout = 0.0f;   // attention_dropout, GPT-2's attn_pdrop
  float resid_dropout = 0.0f;       // resid_pdrop (GPT-2, Phi-3)
  float embd_dropout = 0.0f;        // GPT-2's embd_pdrop
  std::string activation;           // GPT-2's activation_function: gelu_new, gelu, relu, silu
  // Gemma: RMSNorm scales by (1 + weight), its weight initialised to zeros,
  // and the embeddings are multiplied by sqrt(hidden_size).
  bool norm_unit_offset = false;
  bool scale_embeddings = false;
  // Gemma 2: attention scores scaled by query_pre_attn_scalar^-0.5, capped
  // by c * tanh(s / c) (attn_logit_softcapping), logits likewise
  // (final_logit_softcapping); 0: none.
  double query_pre_attn_scalar = 0;
  double attn_logit_softcapping = 0;
  double final_logit_softcapping = 0;
  // Mixtral: a sparse mixture of experts in place of the MLP.
  std::int64_t num_local_experts = 0;  // 0: a dense MLP
  std::int64_t num_experts_per_tok = 0;
  bool output_router_logits = false;   // adds the load-balancing loss in training
  double router_aux_loss_coef = 0.001;
  std::int64_t original_max_position_embeddings = 0;  // Phi-3's, kept for export
  double initializer_range = 0.02;
  std::optional<std::int64_t> bos_token_id, pad_token_id, eos_token_id;
  // init_args' attn_implementation (transformers' name): "eager" materialises
  // the attention scores (ops::AttentionOptions::eager); "sdpa" fuses them.
  bool eager_attention = false;
  // init_args' gradient_checkpointing: selective: in training, the attention
  // core is recomputed in backward instead of keeping its output
  // (nn::attentionCore).
  bool recompute_attention = false;

  const FamilyInfo& info() const { return familyInfo(family); }
  // Whether decoder layer `layer` attends through the sliding window.
  std::int64_t slidingWindowOf(std::int64_t layer) const {
    if (sliding_window == 0) return 0;
    if (sliding_layers.empty()) return sliding_window;
    return sliding_layers[static_cast<std::size_t>(layer)] ? sliding_window : 0;
  }
};

// The architecture from init_args (Optional[...] keys, null when not given)
// and init_args' "config" (a config.json path, or null). Throws UsageError
// naming the file and key, or the init_arg, for what it cannot build.
TransformerConfig resolveTransformerConfig(Family family, const config::Params& init_args);

// config.json's model_type in `path` (a file, or a model directory holding
// one); throws UsageError naming the file when it has none.
std::string readModelType(const std::string& path);

}  // namespace hpu::core::models
