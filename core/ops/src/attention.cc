// Scaled dot-product attention (device/kernels/attention.h does the work).
#include "hpu/device/kernels/attention.h"

#include <cmath>
#include <vector>

#include "hpu/core/ops/ops.h"
#include "op_support.h"

namespace hpu::core::ops {

using namespace detail;
namespace k = device::kernels;

namespace {

// transformers' eager attention (AttentionOptions::eager) over the first
// `kv_rows` rows of k and v, of which the first kv_len are keys.
Tensor eagerAttention(const Tensor& q, const Tensor& k_in, const Tensor& v_in, const AttentionOptions& o,
                      std::int64_t kv_len, std::int64_t kv_rows) {
  const std::int64_t b = q.size(0), h = q.size(1), t = q.size(2), d = q.size(3), kv_heads = k_in.size(1);
  // A key/value head's query heads as the rows of one product (head i reads
  // key/value head i / (h / kv_heads)), over the rows the graph reads (a
  // cache's bucket): no copies of k and v.
  const Tensor scores =
      matmul(reshape(q, {b, kv_heads, h / kv_heads * t, d}), k_in, {.transpose_b = true, .b_rows = kv_rows});
  Tensor probs = attentionSoftmax(scores, {.queries = t,
                                           .kv_length = kv_len,
                                           .causal = o.causal,
                                           .sliding_window = o.sliding_window,
                                           .scale = o.scale.value_or(1.0f / std::sqrt(static_cast<float>(d))),
                                           .softcap = o.softcap});
  if (o.training && o.dropout_p > 0.0f) probs = dropout(probs, o.dropout_p, true, *o.rng);
  return reshape(matmul(probs, v_in, {.b_rows = kv_rows}), {b, h, t, d});
}

}  // namespace

Tensor scaledDotProductAttention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                 const AttentionOptions& o) {
  require(q_in.ndim() == 4 && k_in.ndim() == 4 && k_in.shape() == v_in.shape() && q_in.size(0) == k_in.size(0) &&
              q_in.size(3) == k_in.size(3) && k_in.size(1) > 0 && q_in.size(1) % k_in.size(1) == 0,
          op::kAttention, [&] {
            return fmt::format(
                "expects q [B, H, T, D] and k, v [B, Hkv, S, D] with H a multiple of Hkv; got {}, {} and {}",
                q_in.shape().str(), k_in.shape().str(), v_in.shape().str());
          });
  const std::int64_t kv_len = o.kv_length < 0 ? k_in.size(2) : o.kv_length;
  require(kv_len >= 1 && kv_len <= k_in.size(2) && (!o.causal || kv_len >= q_in.size(2)), op::kAttention, [&] {
    return fmt::format("{} keys of {} for {} queries{}", kv_len, k_in.size(2), q_in.size(2),
                       o.causal ? " (causal attention needs at least as many keys as queries)" : "");
  });
  require(o.dropout_p >= 0.0f && o.dropout_p < 1.0f && (o.dropout_p == 0.0f || !o.training || o.rng != nullptr),
          op::kAttention, [&] { return fmt::format("dropout_p {} needs 0 <= p < 1 and a generator", o.dropout_p); });
  const std::int64_t kv_rows = o.kv_graph_length < 0 ? k_in.size(2) : o.kv_graph_length;
  require(kv_rows >= kv_len && kv_rows <= k_in.size(2), op::kAttention,
          [&] { return fmt::format("a graph over {} keys of {} for {} attended", kv_rows, k_in.size(2), kv_len); });
  if (o.eager || o.softcap > 0.0f) return eagerAttention(q_in, k_in, v_in, o, kv_len, kv_rows);
  // An fp8 KV cache is read as it is: fp8 quantization runs attention's
  // products on the stored keys and values (no widened copy of the cache).
  const bool fp8_kv = device::isFp8(k_in.dtype()) && v_in.dtype() == k_in.dtype();
  const DType dt = fp8_kv ? computeDtype(op::kAttention, {&q_in}) : computeDtype(op::kAttention, {&q_in, &k_in, &v_in});
  const Tensor q = castTo(q_in, dt), key = fp8_kv ? k_in : castTo(k_in, dt), v = fp8_kv ? v_in : castTo(v_in, dt);
  // Keys and values are recorded as the rows the graph reads.
  const std::int64_t kv_shape[] = {key.size(0), key.size(1), kv_rows, key.size(3)};
  const device::OperandInfo operands[] = {operandInfo(q), {kv_shape, key.dtype(), key.requiresGrad()},
                                          {kv_shape, v.dtype(), v.requiresGrad()}};
  const OpRecord op_record(q.device(), op::kAttention.name, operands);
  k::AttentionShape g;
  g.batch = q.size(0);
  g.heads = q.size(1);
  g.kv_heads = key.size(1);
  g.q_len = q.size(2);
  g.kv_len = kv_len;
  g.kv_rows = key.size(2);
  g.head_dim = q.size(3);
  g.scale = o.scale.value_or(1.0f / std::sqrt(static_cast<float>(g.head_dim)));
  g.causal = o.causal;
  g.window = o.sliding_window;
  g.bf16 = dt == DType::kBFloat16;
  if (o.training && o.dropout_p > 0.0f) {
    g.dropout_p = o.dropout_p;
    g.dropout_seed = o.rng->next();
    g.head_offset = o.head_offset;
    g.all_heads = o.all_heads;
  }
  Tensor y = like(q, q.shape());
  // One log-sum-exp per query row: what backward needs instead of the scores.
  Tensor lse = Tensor::empty(q.device(), {g.batch, g.heads, g.q_len});
  if (computes(y)) k::attentionForward(g, q.data(), key.data(), v.data(), y.data(), lse.data());
  recordBackward(y, {&q, &key, &v}, [q, key, v, y, lse, g] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    require(g.kv_len == g.kv_rows || (!wants(key) && !wants(v)), op::kAttention,
            "gradients of a partly filled KV cache are not defined");
    // The kernel writes all three gradients in one pass; each is added to its
    // input's gradient in turn, which is right whatever the inputs' states
    // (q, k and v may even be one tensor).
    // In device memory (the allocator's cached blocks: no fresh pages per step).
    k::AttentionShape gb = g;
    gb.bf16 = g.bf16 && gy.dtype() == DType::kBFloat16;
    Tensor dq = Tensor::empty(q.device(), q.shape()), dk = Tensor::empty(q.device(), key.shape()),
           dv = Tensor::empty(q.device(), v.shape());
    if (computes(y))
      k::attentionBackward(gb, q.data(), key.data(), v.data(), y.data(), gy.data(), lse.data(), dq.data(), false,
                           dk.data(), dv.data(), false);
    if (wants(q)) accumulateGrad(q, dq.data());
    if (wants(key)) accumulateGrad(key, dk.data());
    if (wants(v)) accumulateGrad(v, dv.data());
  });
  return finish(y);
}

}  // namespace hpu::core::ops
