// The keys and values every attention layer has seen, for generation: after
// the prompt's forward, each new token's forward reads them instead of
// recomputing the whole sequence. Allocated on the device at full capacity
// up front ([batch, kv_heads, capacity, head_dim] per layer, for keys and for
// values), so a generation knows at its start whether its cache fits, and
// the memory statistics show it whole. Attention reads it whole, or, with a
// bucket size, its filled part rounded up to a bucket: static-shape graphs,
// one per bucket, as optimum-habana's --bucket_size with --bucket_internal.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "hpu/core/tensor/tensor.h"

namespace hpu::core::nn {

class KVCache {
 public:
  KVCache(device::Device& device, std::int64_t layers, std::int64_t batch, std::int64_t kv_heads, std::int64_t capacity,
          std::int64_t head_dim, DType dtype = DType::kFloat32, std::int64_t bucket = 0);

  // Tokens cached: positions 0 .. length() - 1.
  std::int64_t length() const { return length_; }
  std::int64_t capacity() const { return capacity_; }
  // The rows attention reads when `filled` are in use: the capacity, or
  // `filled` rounded up to the bucket.
  std::int64_t attendedRows(std::int64_t filled) const;

  // Stores layer `layer`'s keys and values of this step's T tokens
  // ([batch, kv_heads, T, head_dim]) at positions length() .. length() + T - 1
  // and returns the layer's whole key and value tensors: attend to their
  // first length() + T rows. Throws Error when the cache is full.
  std::pair<Tensor, Tensor> append(std::int64_t layer, const Tensor& keys, const Tensor& values);
  // The step's tokens are in every layer: length() grows by `tokens`.
  void advance(std::int64_t tokens);

 private:
  std::vector<Tensor> keys_, values_;
  std::int64_t capacity_;
  std::int64_t bucket_;
  std::int64_t length_ = 0;
};

}  // namespace hpu::core::nn
