// The keys and values every attention layer has seen, for generation: after
// the prompt's forward, each new token's forward reads them instead of
// recomputing the whole sequence. Each layer holds [batch, kv_heads, rows,
// head_dim] for keys and for values, on the device, taken one of two ways:
// - KVCacheAllocation::kWhole: every layer at the full capacity before the
//   prompt's forward (optimum-habana's --reuse_cache);
// - kPromptFirst: the prompt's forward stores its keys and values at the
//   prompt's length, and the first token after it pads each layer to the
//   full capacity, a layer at a time (optimum-habana's --bucket_internal
//   without --reuse_cache, its default): the prompt's forward runs beside
//   the prompt's rows only, and the pad copies them once.
// Attention reads a layer's rows whole, or, with a bucket size, its filled
// part rounded up to a bucket: static-shape graphs, one per bucket, as
// optimum-habana's --bucket_size with --bucket_internal. Not thread-safe.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "hpu/core/tensor/tensor.h"

namespace hpu::core::nn {

enum class KVCacheAllocation { kWhole, kPromptFirst };

class KVCache {
 public:
  KVCache(device::Device& device, std::int64_t layers, std::int64_t batch, std::int64_t kv_heads, std::int64_t capacity,
          std::int64_t head_dim, DType dtype = DType::kFloat32, std::int64_t bucket = 0,
          KVCacheAllocation allocation = KVCacheAllocation::kWhole);

  // Tokens cached: positions 0 .. length() - 1.
  std::int64_t length() const { return length_; }
  std::int64_t capacity() const { return capacity_; }
  // The rows of layer `layer` attention reads when `filled` are in use: in
  // the prompt's forward (an empty cache before it) the prompt's own, as
  // optimum-habana's KVCache.update hands that forward its keys and values;
  // after it, all the layer holds, or `filled` rounded up to the bucket.
  std::int64_t attendedRows(std::int64_t layer, std::int64_t filled) const;
  // Rows layer `layer` holds now (0 before its first append under kPromptFirst).
  std::int64_t rows(std::int64_t layer) const;

  // Stores layer `layer`'s keys and values of this step's T tokens
  // ([batch, kv_heads, T, head_dim]) at positions length() .. length() + T - 1
  // and returns the layer's key and value tensors (taken or padded first as
  // the allocation says): attend to their first length() + T rows. Throws
  // Error when the cache is full.
  std::pair<Tensor, Tensor> append(std::int64_t layer, const Tensor& keys, const Tensor& values);
  // The step's tokens are in every layer: length() grows by `tokens`.
  void advance(std::int64_t tokens);

 private:
  // Gives layer `layer` `new_rows` rows, its cached ones copied over (a pad).
  void resize(std::int64_t layer, std::int64_t new_rows);

  device::Device& device_;
  std::int64_t batch_, kv_heads_, head_dim_;
  DType dtype_;
  std::vector<Tensor> keys_, values_;
  std::int64_t capacity_;
  std::int64_t bucket_;
  std::int64_t length_ = 0;
};

}  // namespace hpu::core::nn
