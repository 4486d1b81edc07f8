#include "hpu/core/nn/layers/self_attention.h"

#include "hpu/core/nn/kv_cache.h"
#include "hpu/core/nn/layers/rotary.h"
#include "hpu/core/ops/parallel.h"
#include "hpu/core/tensor/autograd.h"

namespace hpu::core::nn {

LocalHeads localHeads(std::int64_t num_heads, std::int64_t num_key_value_heads, int ranks) {
  if (num_heads % ranks != 0)
    throw UsageError(fmt::format("num_attention_heads {} cannot be split across {} tensor-parallel ranks; choose a "
                                 "tensor_parallel_size that divides it",
                                 num_heads, ranks));
  if (num_key_value_heads % ranks == 0) return {num_heads / ranks, num_key_value_heads / ranks, 1};
  if (ranks % num_key_value_heads != 0)
    throw UsageError(fmt::format("num_key_value_heads {} and {} tensor-parallel ranks: one must divide the other",
                                 num_key_value_heads, ranks));
  return {num_heads / ranks, 1, static_cast<int>(ranks / num_key_value_heads)};
}

Tensor attentionCore(const Tensor& q, const Tensor& k, const Tensor& v, const ops::AttentionOptions& a, bool recompute) {
  if (!recompute || !a.training || autograd::currentTape() == nullptr)
    return ops::scaledDotProductAttention(q, k, v, a);
  // The recomputation in backward splits as the forward did.
  const auto attend = [a, sequence_parallel = ops::sequenceParallel()](const std::vector<Tensor>& qkv) {
    const ops::SequenceParallelScope scope(sequence_parallel);
    return ops::scaledDotProductAttention(qkv[0], qkv[1], qkv[2], a);
  };
  return ops::checkpoint(attend, {q, k, v}, a.rng);
}

SelfAttention::SelfAttention(InitContext& ctx, const SelfAttentionOptions& o)
    : o_(o),
      local_(o.tensor_parallel ? localHeads(o.num_heads, o.num_key_value_heads, o.tensor_parallel->size())
                               : LocalHeads{o.num_heads, o.num_key_value_heads, 1}),
      dropout_rng_(&ctx.dropout_rng) {
  if (o_.head_dim == 0) o_.head_dim = o_.hidden_size / o_.num_heads;
  const std::int64_t q = o_.num_heads * o_.head_dim, kv = o_.num_key_value_heads * o_.head_dim;
  LinearParallel column, row, kv_column;
  if (ops::ParallelGroup* g = o_.tensor_parallel) {
    column = {.split = ParallelSplit::kColumn, .group = g};
    row = {.split = ParallelSplit::kRow, .group = g};
    kv_column = column;
    if (local_.kv_replicas > 1) {
      kv_column.pieces = static_cast<int>(o_.num_key_value_heads);
      kv_column.replicas = &g->subgroupOf(local_.kv_replicas);
    }
  }
  if (o_.fused_qkv) {
    // Phi-3's [q; k; v] rows: split across ranks as three blocks needs equal ones.
    if (o_.tensor_parallel != nullptr && kv != q)
      throw UsageError(fmt::format("a fused qkv_proj with {} key/value heads for {} query heads does not split across "
                                   "tensor-parallel ranks (its q, k and v blocks differ in size); use "
                                   "tensor_parallel_size 1 for this model",
                                   o_.num_key_value_heads, o_.num_heads));
    LinearParallel qkv = column;
    if (o_.tensor_parallel != nullptr) qkv.blocks = 3;
    qkv_proj = registerChild("qkv_proj", std::make_shared<Linear>(ctx, o_.hidden_size, q + 2 * kv, o_.bias, qkv));
  } else {
    q_proj = registerChild("q_proj", std::make_shared<Linear>(ctx, o_.hidden_size, q, o_.bias, column));
    k_proj = registerChild("k_proj", std::make_shared<Linear>(ctx, o_.hidden_size, kv, o_.bias, kv_column));
    v_proj = registerChild("v_proj", std::make_shared<Linear>(ctx, o_.hidden_size, kv, o_.bias, kv_column));
  }
  o_proj = registerChild("o_proj", std::make_shared<Linear>(ctx, q, o_.hidden_size, o_.output_bias, row));
}

std::string SelfAttention::describe() const {
  std::string s = fmt::format("heads={}", o_.num_heads);
  if (o_.num_key_value_heads != o_.num_heads) s += fmt::format(", kv_heads={}", o_.num_key_value_heads);
  if (o_.tensor_parallel) s += fmt::format(", {} heads on each of {} ranks", local_.heads, o_.tensor_parallel->size());
  if (o_.rope_theta > 0) s += fmt::format(", rope_theta={}", o_.rope_theta);
  if (o_.rope_scaling.type != ops::RopeScaling::Type::kNone) s += fmt::format(", rope_scaling x{}", o_.rope_scaling.factor);
  if (!o_.causal) s += ", bidirectional";
  if (o_.sliding_window > 0) s += fmt::format(", sliding_window={}", o_.sliding_window);
  if (o_.softcap > 0) s += fmt::format(", softcap={}", o_.softcap);
  return s;
}

Tensor SelfAttention::forward(const Tensor& x) { return forward(Inputs{{{"hidden_states", x}}, nullptr}); }

Tensor SelfAttention::forward(const Inputs& in) {
  const Tensor& hidden = in.tensors["hidden_states"];
  const Tensor x = o_.tensor_parallel ? ops::toParallelRegion(hidden, *o_.tensor_parallel) : hidden;
  const std::int64_t cached = in.kv_cache ? in.kv_cache->length() : 0;
  // This rank's q, k and v projections: three layers, or the pieces of a fused one.
  Tensor pq, pk, pv;
  if (o_.fused_qkv) {
    const std::int64_t q = local_.heads * o_.head_dim, kv = local_.kv_heads * o_.head_dim, sizes[] = {q, kv, kv};
    const std::vector<Tensor> pieces = ops::split(qkv_proj(x), sizes);
    pq = pieces[0], pk = pieces[1], pv = pieces[2];
  } else {
    pq = q_proj(x), pk = k_proj(x), pv = v_proj(x);
  }
  Tensor q, k;
  if (o_.rope_theta > 0) {  // the heads split as they rotate
    const Tensor* given = in.tensors.find("position_ids");
    const Tensor positions = given ? *given : positionRange(x.device(), cached, x.size(1));
    q = ops::splitHeadsRotary(pq, local_.heads, positions, o_.rope_theta, o_.rope_scaling);
    k = ops::splitHeadsRotary(pk, local_.kv_heads, positions, o_.rope_theta, o_.rope_scaling);
  } else {
    q = ops::splitHeads(pq, local_.heads);
    k = ops::splitHeads(pk, local_.kv_heads);
  }
  Tensor v = ops::splitHeads(pv, local_.kv_heads);
  ops::AttentionOptions a{
      .causal = o_.causal, .scale = o_.scale, .sliding_window = o_.sliding_window, .eager = o_.eager, .softcap = o_.softcap};
  if (in.kv_cache != nullptr) {
    std::tie(k, v) = in.kv_cache->append(o_.cache_layer, k, v);
    a.kv_length = cached + x.size(1);
    a.kv_graph_length = in.kv_cache->attendedRows(o_.cache_layer, a.kv_length);
  }
  a.dropout_p = o_.dropout;
  if (o_.tensor_parallel) {
    a.head_offset = local_.heads * o_.tensor_parallel->rank();
    a.all_heads = o_.num_heads;
  }
  a.training = training();
  a.rng = dropout_rng_;
  return o_proj(ops::mergeHeads(attentionCore(q, k, v, a, o_.recompute)));
}

}  // namespace hpu::core::nn
