#include "hpu/core/nn/layers/self_attention.h"

#include "hpu/core/nn/kv_cache.h"
#include "hpu/core/nn/layers/rotary.h"

namespace hpu::core::nn {

SelfAttention::SelfAttention(InitContext& ctx, const SelfAttentionOptions& o) : o_(o), dropout_rng_(&ctx.dropout_rng) {
  if (o_.head_dim == 0) o_.head_dim = o_.hidden_size / o_.num_heads;
  const std::int64_t q = o_.num_heads * o_.head_dim, kv = o_.num_key_value_heads * o_.head_dim;
  q_proj = registerChild("q_proj", std::make_shared<Linear>(ctx, o_.hidden_size, q, o_.bias));
  k_proj = registerChild("k_proj", std::make_shared<Linear>(ctx, o_.hidden_size, kv, o_.bias));
  v_proj = registerChild("v_proj", std::make_shared<Linear>(ctx, o_.hidden_size, kv, o_.bias));
  o_proj = registerChild("o_proj", std::make_shared<Linear>(ctx, q, o_.hidden_size, o_.bias));
}

std::string SelfAttention::describe() const {
  std::string s = fmt::format("heads={}", o_.num_heads);
  if (o_.num_key_value_heads != o_.num_heads) s += fmt::format(", kv_heads={}", o_.num_key_value_heads);
  if (o_.rope_theta > 0) s += fmt::format(", rope_theta={}", o_.rope_theta);
  if (o_.rope_scaling.type != ops::RopeScaling::Type::kNone) s += fmt::format(", rope_scaling x{}", o_.rope_scaling.factor);
  if (!o_.causal) s += ", bidirectional";
  return s;
}

Tensor SelfAttention::forward(const Tensor& x) { return forward(Inputs{{{"hidden_states", x}}, nullptr}); }

Tensor SelfAttention::forward(const Inputs& in) {
  const Tensor& x = in.tensors["hidden_states"];
  const std::int64_t cached = in.kv_cache ? in.kv_cache->length() : 0;
  Tensor q = ops::splitHeads(q_proj(x), o_.num_heads);
  Tensor k = ops::splitHeads(k_proj(x), o_.num_key_value_heads);
  Tensor v = ops::splitHeads(v_proj(x), o_.num_key_value_heads);
  if (o_.rope_theta > 0) {
    const Tensor* given = in.tensors.find("position_ids");
    const Tensor positions = given ? *given : positionRange(x.device(), cached, x.size(1));
    q = ops::rotaryEmbedding(q, positions, o_.rope_theta, o_.rope_scaling);
    k = ops::rotaryEmbedding(k, positions, o_.rope_theta, o_.rope_scaling);
  }
  ops::AttentionOptions a{.causal = o_.causal, .sliding_window = o_.sliding_window};
  if (in.kv_cache != nullptr) {
    std::tie(k, v) = in.kv_cache->append(o_.cache_layer, k, v);
    a.kv_length = cached + x.size(1);
    a.kv_graph_length = in.kv_cache->attendedRows(a.kv_length);
  }
  a.dropout_p = o_.dropout;
  a.training = training();
  a.rng = dropout_rng_;
  return o_proj(ops::mergeHeads(ops::scaledDotProductAttention(q, k, v, a)));
}

}  // namespace hpu::core::nn
