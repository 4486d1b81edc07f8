// The price of each recorded op on a Gaudi: which engine runs it, how many
// FLOPs it does and how long it takes (device/gaudi_model.h), from the op's
// name and operand shapes as the lazy graph records them, for its forward
// and for its backward function.
//  - Products (linear, matmul, conv2d, fp8_linear) run on the matrix engine,
//    or as multiply-adds on the vector engine when their output tiles would
//    leave the arrays mostly empty; their backward does the two products of
//    the gradient.
//  - Attention is a fused FlashAttention kernel: its products, the softmax
//    over every score on the vector engine and its HBM traffic overlap.
//  - Everything else is a vector (TPC) pass over its operands and output.
//  - h2d copies cross the host link; optimizer_step_host runs on the host.
// Thread-safety: pure functions.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "hpu/device/gaudi_model.h"
#include "hpu/device/graph.h"

namespace hpu::core::estimate {

enum class Engine { kMatrix, kVector, kOptimizer, kOffload, kHostLink, kNone };

struct OpCost {
  Engine engine = Engine::kNone;
  double seconds = 0;
  double flops = 0;      // matrix-engine FLOPs
  device::Work work{};   // what `seconds` prices (GaudiModel::seconds)
};

struct OpPrice {
  OpCost forward;
  OpCost backward;  // of its backward function (kNone: it has none)
};

OpPrice priceOp(const device::GaudiModel& model, std::string_view op, std::span<const device::OperandInfo> operands);

// The pricing's own constants (instructions per element, kernel structure),
// with their sources, as --verbose lists them beside the model's.
std::vector<device::Assumption> opCostAssumptions();

}  // namespace hpu::core::estimate
