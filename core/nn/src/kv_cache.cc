#include "hpu/core/nn/kv_cache.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>

#include "hpu/core/base/errors.h"
#include "hpu/core/tensor/op_record.h"
#include "hpu/device/numerics.h"

namespace hpu::core::nn {

KVCache::KVCache(device::Device& device, std::int64_t layers, std::int64_t batch, std::int64_t kv_heads,
                 std::int64_t capacity, std::int64_t head_dim, DType dtype, std::int64_t bucket,
                 KVCacheAllocation allocation)
    : device_(device),
      batch_(batch),
      kv_heads_(kv_heads),
      head_dim_(head_dim),
      dtype_(dtype),
      keys_(static_cast<std::size_t>(layers)),
      values_(static_cast<std::size_t>(layers)),
      capacity_(capacity),
      bucket_(bucket) {
  if (allocation == KVCacheAllocation::kWhole)
    for (std::int64_t l = 0; l < layers; ++l) resize(l, capacity);
}

std::int64_t KVCache::rows(std::int64_t layer) const {
  const Tensor& k = keys_.at(static_cast<std::size_t>(layer));
  return k.defined() ? k.size(2) : 0;
}

void KVCache::resize(std::int64_t layer, std::int64_t new_rows) {
  const std::int64_t old_rows = rows(layer), groups = batch_ * kv_heads_, d = head_dim_;
  for (std::vector<Tensor>* side : {&keys_, &values_}) {
    Tensor& held = side->at(static_cast<std::size_t>(layer));
    Tensor grown = Tensor::zeros(device_, {batch_, kv_heads_, new_rows, head_dim_}, dtype_);
    if (old_rows > 0) {
      // A pad: the layer's keys (values) read once and written into the larger cache.
      const device::OperandInfo operands[] = {operandInfo(held), operandInfo(grown)};
      const ops::OpRecord op_record(device_, "kv_cache_pad", operands);
      if (!grown.shapeOnly())
        for (std::int64_t g = 0; g < groups; ++g)
          std::copy_n(held.data() + g * old_rows * d, old_rows * d, grown.data() + g * new_rows * d);
    }
    held = std::move(grown);  // the old rows are freed here, before the other side grows
  }
}

std::pair<Tensor, Tensor> KVCache::append(std::int64_t layer, const Tensor& keys, const Tensor& values) {
  const std::int64_t t = keys.size(2);
  if (length_ + t > capacity_)
    throw Error(
        fmt::format("the KV cache holds {} tokens; {} more do not fit (raise max_new_tokens' room: the cache is "
                    "sized prompt + max_new_tokens)",
                    capacity_, length_ + t - capacity_));
  // kPromptFirst: the prompt's rows first, then the whole capacity.
  if (rows(layer) < length_ + t) resize(layer, rows(layer) == 0 ? length_ + t : capacity_);
  Tensor& kc = keys_.at(static_cast<std::size_t>(layer));
  Tensor& vc = values_.at(static_cast<std::size_t>(layer));
  const device::OperandInfo operands[] = {operandInfo(keys), operandInfo(kc)};
  const ops::OpRecord op_record(kc.device(), "kv_cache_update", operands);
  if (!kc.shapeOnly()) {
    const std::int64_t groups = kc.size(0) * kc.size(1), d = kc.size(3), held = kc.size(2);
    for (auto [from, to] : {std::pair{&keys, &kc}, std::pair{&values, &vc}}) {
      for (std::int64_t g = 0; g < groups; ++g) {
        float* at = to->data() + (g * held + length_) * d;
        std::copy_n(from->data() + g * t * d, t * d, at);
        if (to->dtype() != from->dtype()) device::roundInPlace({at, static_cast<std::size_t>(t * d)}, to->dtype());
      }
    }
  }
  return {kc, vc};
}

std::int64_t KVCache::attendedRows(std::int64_t layer, std::int64_t filled) const {
  if (length_ == 0) return filled;  // the prompt's forward: its own keys
  if (bucket_ <= 0) return rows(layer);
  return std::min(rows(layer), (filled + bucket_ - 1) / bucket_ * bucket_);
}

void KVCache::advance(std::int64_t tokens) { length_ += tokens; }

}  // namespace hpu::core::nn
