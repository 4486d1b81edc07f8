// SelfAttention: multi-head self-attention over [B, T, hidden] with
// Hugging Face's projections (q_proj, k_proj, v_proj, o_proj; or Phi-3's
// one qkv_proj holding q, k and v in that order): optional rotary
// embeddings, grouped-query attention, causal mask, sliding window,
// soft-capped scores, dropout on the probabilities, and a KV cache when
// generating. The attention of Llama and of the families built like it is
// this module; in YAML it is one layer of a Sequential.
// Split across a tensor-parallel group (Megatron-LM's), each rank holds
// num_heads / size query heads and their key/value heads: q, k, v
// column-parallel, o row-parallel (one all-reduce in forward, one in
// backward). With fewer key/value heads than ranks, each is held by
// size / num_key_value_heads ranks, which sum its projections' gradients.
#pragma once

#include "hpu/core/nn/layer.h"
#include "hpu/core/nn/layers/linear.h"

namespace hpu::core::nn {

struct SelfAttentionOptions {
  std::int64_t hidden_size = 0;
  std::int64_t num_heads = 1;
  std::int64_t num_key_value_heads = 1;  // fewer than num_heads: grouped-query attention
  std::int64_t head_dim = 0;             // 0: hidden_size / num_heads
  bool bias = false;                     // of the q, k and v projections
  bool output_bias = false;              // of o_proj (Qwen2 has q, k, v biases and none here)
  bool fused_qkv = false;                // one qkv_proj (Phi-3's) in place of q_proj, k_proj, v_proj
  std::optional<float> scale;            // of the scores; default 1 / sqrt(head_dim)
  float softcap = 0.0f;                  // > 0: scores capped (ops::AttentionOptions::softcap)
  float rope_theta = 0.0f;               // rotary embeddings' base; 0: none
  ops::RopeScaling rope_scaling;         // their rescaling (Llama 3's)
  bool causal = true;
  std::int64_t sliding_window = 0;  // > 0: each query sees only that many latest keys
  float dropout = 0.0f;             // on the attention probabilities, in training
  std::int64_t cache_layer = 0;     // this module's layer in a KVCache
  bool eager = false;               // scores materialised (ops::AttentionOptions::eager)
  bool recompute = false;  // in training, the core's output recomputed in backward (attentionCore)
  ops::ParallelGroup* tensor_parallel = nullptr;  // the heads split across it
};

// The attention core, ops::scaledDotProductAttention(q, k, v, a). With
// `recompute`, in training (a.training) with a tape recording, its output is not kept for backward but
// recomputed from q, k and v there, the dropout masks redrawn alike
// (Megatron-LM's selective recompute; gradient_checkpointing: selective).
Tensor attentionCore(const Tensor& q, const Tensor& k, const Tensor& v, const ops::AttentionOptions& a, bool recompute);

// Query and key/value heads on one rank of a tensor-parallel group of
// `ranks`. Throws UsageError when the heads cannot be split so.
struct LocalHeads {
  std::int64_t heads, kv_heads;
  int kv_replicas;  // ranks holding each key/value head (1: each its own)
};
LocalHeads localHeads(std::int64_t num_heads, std::int64_t num_key_value_heads, int ranks);

class SelfAttention : public Module {
 public:
  // Dropout masks come from ctx.dropout_rng.
  SelfAttention(InitContext& ctx, const SelfAttentionOptions& o);
  std::string typeName() const override { return "SelfAttention"; }
  std::string describe() const override;
  // x [B, T, hidden] at positions 0 .. T - 1, no cache.
  Tensor forward(const Tensor& x) override;
  // "hidden_states" [B, T, hidden], "position_ids" int64 [T] (default: from
  // the cache's length on), and the KV cache, if any: this step's keys and
  // values are appended to layer cache_layer and attention reads all of it.
  Tensor forward(const Inputs& in) override;

  Child<Linear> q_proj, k_proj, v_proj, o_proj;
  Child<Linear> qkv_proj;  // with fused_qkv, in place of the first three

 private:
  SelfAttentionOptions o_;
  LocalHeads local_;
  Generator* dropout_rng_;
};

inline const LayerRegistration kSelfAttentionLayer{
    layerSchema("SelfAttention",
                {{"num_heads", config::Type::integer().min(1), "null", "Query heads."},
                 {"num_key_value_heads", config::Type::optional(config::Type::integer().min(1)), "null",
                  "Key/value heads; fewer than num_heads is grouped-query attention (default: num_heads)."},
                 {"causal", config::Type::boolean(), "true", "Each token attends only to itself and earlier ones."},
                 {"rope_theta", config::Type::optional(config::Type::real().min(0.0, true)), "null",
                  "Rotary position embeddings of queries and keys with this base (default: none)."},
                 {"dropout", config::Type::real().min(0.0).max(1.0, true), "0.0",
                  "Dropout on the attention probabilities in training."},
                 {"bias", config::Type::boolean(), "false", "Biases on the q, k, v and output projections."}},
                "Multi-head self-attention over [tokens, features] samples, memory linear in tokens."),
    [](const config::Params& p, InitContext& ctx, const Shape& in, const std::string& where) {
      SelfAttentionOptions o;
      o.num_heads = p.getInt("num_heads");
      o.num_key_value_heads = p.has("num_key_value_heads") ? p.getInt("num_key_value_heads") : o.num_heads;
      if (in.ndim() != 2 || in[1] % o.num_heads != 0)
        layerMisfit(where, fmt::format("SelfAttention needs [tokens, features] samples with features a multiple of "
                                       "num_heads {}; got {}",
                                       o.num_heads, in.str()));
      if (o.num_heads % o.num_key_value_heads != 0)
        layerMisfit(where, fmt::format("num_heads {} is not a multiple of num_key_value_heads {}", o.num_heads,
                                       o.num_key_value_heads));
      o.hidden_size = in[1];
      o.causal = p.getBool("causal");
      if (p.has("rope_theta")) o.rope_theta = static_cast<float>(p.getFloat("rope_theta"));
      if (o.rope_theta > 0 && (o.hidden_size / o.num_heads) % 2 != 0)
        layerMisfit(where, fmt::format("rotary embeddings need an even head_dim; {} / {} heads is {}", o.hidden_size,
                                       o.num_heads, o.hidden_size / o.num_heads));
      o.dropout = static_cast<float>(p.getFloat("dropout"));
      o.bias = o.output_bias = p.getBool("bias");
      return LayerBuild{std::make_shared<SelfAttention>(ctx, o), in};
    }};

}  // namespace hpu::core::nn
