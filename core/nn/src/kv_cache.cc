#include "hpu/core/nn/kv_cache.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>

#include "hpu/core/base/errors.h"
#include "hpu/core/tensor/op_record.h"
#include "hpu/device/numerics.h"

namespace hpu::core::nn {

KVCache::KVCache(device::Device& device, std::int64_t layers, std::int64_t batch, std::int64_t kv_heads,
                 std::int64_t capacity, std::int64_t head_dim, DType dtype, std::int64_t bucket)
    : capacity_(capacity), bucket_(bucket) {
  for (std::int64_t l = 0; l < layers; ++l) {
    keys_.push_back(Tensor::zeros(device, {batch, kv_heads, capacity, head_dim}, dtype));
    values_.push_back(Tensor::zeros(device, {batch, kv_heads, capacity, head_dim}, dtype));
  }
}

std::pair<Tensor, Tensor> KVCache::append(std::int64_t layer, const Tensor& keys, const Tensor& values) {
  Tensor& kc = keys_.at(static_cast<std::size_t>(layer));
  Tensor& vc = values_.at(static_cast<std::size_t>(layer));
  const std::int64_t t = keys.size(2);
  if (length_ + t > capacity_)
    throw Error(
        fmt::format("the KV cache holds {} tokens; {} more do not fit (raise max_new_tokens' room: the cache is "
                    "sized prompt + max_new_tokens)",
                    capacity_, length_ + t - capacity_));
  const device::OperandInfo operands[] = {operandInfo(keys), operandInfo(kc)};
  const ops::OpRecord op_record(kc.device(), "kv_cache_update", operands);
  if (!kc.shapeOnly()) {
    const std::int64_t groups = kc.size(0) * kc.size(1), d = kc.size(3);
    for (auto [from, to] : {std::pair{&keys, &kc}, std::pair{&values, &vc}}) {
      for (std::int64_t g = 0; g < groups; ++g) {
        float* rows = to->data() + (g * capacity_ + length_) * d;
        std::copy_n(from->data() + g * t * d, t * d, rows);
        if (to->dtype() != from->dtype()) device::roundInPlace({rows, static_cast<std::size_t>(t * d)}, to->dtype());
      }
    }
  }
  return {kc, vc};
}

std::int64_t KVCache::attendedRows(std::int64_t filled) const {
  if (bucket_ <= 0) return capacity_;
  return std::min(capacity_, (filled + bucket_ - 1) / bucket_ * bucket_);
}

void KVCache::advance(std::int64_t tokens) { length_ += tokens; }

}  // namespace hpu::core::nn
