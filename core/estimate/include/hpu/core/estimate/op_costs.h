// The price of each recorded op on a Gaudi: which engine runs it, how many
// FLOPs it does and how long it takes (device/gaudi_model.h), from the op's
// name and operand shapes as the lazy graph records them.
//  - Products (linear, matmul, conv2d, attention, fp8_linear) run on the
//    matrix engine; their backward does the two products of the gradient
//    (attention: FlashAttention's five against the forward's two).
//  - Everything else is a vector (TPC) pass over its operands and output.
//  - h2d copies cross the host link; optimizer_step_host runs on the host.
// Thread-safety: pure functions.
#pragma once

#include <span>
#include <string_view>

#include "hpu/device/gaudi_model.h"
#include "hpu/device/graph.h"

namespace hpu::core::estimate {

enum class Engine { kMatrix, kVector, kOptimizer, kOffload, kHostLink, kNone };

struct OpCost {
  Engine engine = Engine::kNone;
  double seconds = 0;
  double flops = 0;  // matrix-engine FLOPs
};

OpCost forwardCost(const device::GaudiModel& model, std::string_view op, std::span<const device::OperandInfo> operands);
// The backward function of an op whose forward cost `forward`.
OpCost backwardCost(std::string_view op, const OpCost& forward);

}  // namespace hpu::core::estimate
