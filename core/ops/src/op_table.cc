#include "hpu/core/ops/op_table.h"

#include <algorithm>

namespace hpu::core::ops {

std::span<const OpInfo> opTable() {
  using namespace op;
  static constexpr OpInfo kTable[] = {
      kLinear,  kMatmul,    kConv2d,    kMaxPool2d, kAvgPool2d,    kRelu,      kGelu,    kGeluTanh, kTanh, kSigmoid,
      kDropout, kLayerNorm, kBatchNorm, kEmbedding, kCrossEntropy, kMseLoss,   kAdd,     kSub,      kMul,  kScale,
      kSum,     kSoftmax,   kPermute,   kSplit,     kNarrow,       kAttention, kAttentionSoftmax, kRmsNorm, kRotary,   kSilu, kSwiglu,
      kSoftcap, kRouterTopK, kDispatchRows, kCombineRows, kConcat};
  return kTable;
}

const OpInfo* findOp(std::string_view name) {
  const auto table = opTable();
  const auto it = std::find_if(table.begin(), table.end(), [&](const OpInfo& o) { return o.str() == name; });
  return it == table.end() ? nullptr : &*it;
}

}  // namespace hpu::core::ops
