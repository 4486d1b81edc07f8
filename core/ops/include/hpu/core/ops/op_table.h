// The ops of the functional API, one constant each: the name an op carries
// in lazy-mode graphs, traces, profiles and LOWER_LIST / FP32_LIST files, and
// how autocast treats it by default. The implementations, the autocast policy
// and op-list validation all read this table.
#pragma once

#include <span>
#include <string_view>

#include "hpu/device/graph.h"

namespace hpu::core::ops {

enum class AutocastClass {
  kLower,    // matmul-like: runs in the autocast dtype, accumulating in fp32
  kFp32,     // numerically sensitive (softmax, losses, norms, reductions): fp32
  kPromote,  // the widest floating dtype of its inputs
};

struct OpInfo {
  device::OpName name;
  AutocastClass autocast;
  constexpr std::string_view str() const { return name.name(); }
};

namespace op {
using enum AutocastClass;
inline constexpr OpInfo kLinear{"linear", kLower};
inline constexpr OpInfo kMatmul{"matmul", kLower};
inline constexpr OpInfo kConv2d{"conv2d", kLower};
inline constexpr OpInfo kMaxPool2d{"max_pool2d", kPromote};
inline constexpr OpInfo kAvgPool2d{"avg_pool2d", kPromote};
inline constexpr OpInfo kRelu{"relu", kPromote};
inline constexpr OpInfo kGelu{"gelu", kPromote};
inline constexpr OpInfo kGeluTanh{"gelu_tanh", kPromote};
inline constexpr OpInfo kTanh{"tanh", kPromote};
inline constexpr OpInfo kSigmoid{"sigmoid", kPromote};
inline constexpr OpInfo kDropout{"dropout", kPromote};
inline constexpr OpInfo kLayerNorm{"layer_norm", kFp32};
inline constexpr OpInfo kBatchNorm{"batch_norm", kFp32};
inline constexpr OpInfo kEmbedding{"embedding", kPromote};
inline constexpr OpInfo kCrossEntropy{"cross_entropy", kFp32};
inline constexpr OpInfo kMseLoss{"mse_loss", kFp32};
inline constexpr OpInfo kAdd{"add", kPromote};
inline constexpr OpInfo kSub{"sub", kPromote};
inline constexpr OpInfo kMul{"mul", kPromote};
inline constexpr OpInfo kScale{"scale", kPromote};
inline constexpr OpInfo kSum{"sum", kFp32};
inline constexpr OpInfo kSoftmax{"softmax", kFp32};
inline constexpr OpInfo kPermute{"permute", kPromote};
inline constexpr OpInfo kSplit{"split", kPromote};
inline constexpr OpInfo kNarrow{"narrow", kPromote};
inline constexpr OpInfo kConcat{"cat", kPromote};
inline constexpr OpInfo kAttention{"scaled_dot_product_attention", kLower};
// Eager attention's softmax over its materialised scores, in the scores'
// dtype (optimum-habana's --attn_softmax_bf16).
inline constexpr OpInfo kAttentionSoftmax{"attention_softmax", kLower};
// Computes in fp32 and returns its input's dtype, as Hugging Face's LlamaRMSNorm
// and Gaudi's FusedRMSNorm do.
inline constexpr OpInfo kRmsNorm{"rms_norm", kPromote};
inline constexpr OpInfo kRotary{"rotary_embedding", kPromote};
inline constexpr OpInfo kSilu{"silu", kPromote};
inline constexpr OpInfo kSwiglu{"swiglu", kPromote};
// c * tanh(x / c): Gemma 2's soft-capping of logits.
inline constexpr OpInfo kSoftcap{"softcap", kPromote};
// Mixture of experts: the router's top-k choices of its probabilities, the
// rows each expert reads, and the experts' weighted outputs summed per token.
inline constexpr OpInfo kRouterTopK{"router_topk", kFp32};
inline constexpr OpInfo kDispatchRows{"moe_dispatch", kPromote};
inline constexpr OpInfo kCombineRows{"moe_combine", kPromote};
}  // namespace op

// Every op above, in this order.
std::span<const OpInfo> opTable();
// The op named `name`, or nullptr.
const OpInfo* findOp(std::string_view name);

}  // namespace hpu::core::ops
