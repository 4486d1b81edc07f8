// Scaled dot-product attention without the [queries, keys] score matrix: the
// softmax is computed online over blocks of keys (FlashAttention's
// algorithm), forward keeps one log-sum-exp per query row, and backward
// recomputes the scores block by block. Memory beyond the inputs and output:
// the log-sum-exps, and per thread a few [64, 128] score blocks.
//
// Grouped-query attention: query head h reads key/value head
// h / (heads / kv_heads). Causal masking aligns the queries with the last
// q_len of the kv_len keys (query i sees keys up to kv_len - q_len + i), so a
// decoding step over a KV cache masks correctly. Dropout masks are a pure
// function of (dropout_seed, batch, head, query, key), so backward draws the
// same ones and results do not depend on the thread count.
//
// Work is split over (batch, head, query block) in forward and (batch, kv
// head) in backward on the intra-op threads; each output element is computed
// by one thread in a fixed order: the results are the same bits for any
// thread count.
#pragma once

#include <cstdint>

namespace hpu::device::kernels {

struct AttentionShape {
  std::int64_t batch = 1, heads = 1, kv_heads = 1;
  std::int64_t q_len = 1;     // T: queries per head
  std::int64_t kv_len = 1;    // S: keys (and values) attended to per head
  std::int64_t kv_rows = 1;   // rows from one kv head to the next in k and v (>= kv_len: a cache's capacity)
  std::int64_t head_dim = 1;  // D
  float scale = 1.0f;         // scores are (q . k) * scale
  bool causal = true;         // query i sees keys j <= kv_len - q_len + i
  std::int64_t window = 0;    // > 0 (causal only): and only the last `window` of them (sliding window)
  float dropout_p = 0.0f;     // probabilities dropped, the rest scaled by 1 / (1 - dropout_p)
  std::uint64_t dropout_seed = 0;
  // These heads are heads [head_offset, head_offset + heads) of a layer of
  // all_heads (a tensor-parallel rank's): dropout masks are those of that
  // layer's heads. 0: all_heads = heads.
  std::int64_t head_offset = 0, all_heads = 0;
  // q, k, v (and dout) hold bfloat16 values: the products run on bf16
  // operands, the probabilities and their gradients rounded to bf16 for
  // theirs, as FlashAttention computes in bf16 (softmax statistics in fp32).
  bool bf16 = false;
};

// q and out [batch, heads, q_len, D]; k, v [batch, kv_heads, kv_rows, D] (the
// first kv_len rows of each head are read); lse [batch, heads, q_len].
void attentionForward(const AttentionShape& g, const float* q, const float* k, const float* v, float* out, float* lse);

// Gradients from dout (like out). dq like q; dk, dv like k and v (their first
// kv_len rows per head are written). accumulate_* selects += over =.
void attentionBackward(const AttentionShape& g, const float* q, const float* k, const float* v, const float* out,
                       const float* dout, const float* lse, float* dq, bool accumulate_dq, float* dk, float* dv,
                       bool accumulate_kv);

}  // namespace hpu::device::kernels
