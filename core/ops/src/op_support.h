// What every op's implementation shares: argument errors, autocast (the
// dtype an op runs in, differentiable casts, rounding of outputs), the op's
// record, and its backward on the tape.
//
// Shape-only devices: an op allocates and records exactly as on a real
// device, and skips its arithmetic: `computes(t)` is false, and a backward's
// GradTarget::data is null.
#pragma once

#include <spdlog/fmt/fmt.h>

#include <initializer_list>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "hpu/core/base/errors.h"
#include "hpu/core/ops/op_table.h"
#include "hpu/core/tensor/autograd.h"
#include "hpu/core/tensor/op_record.h"
#include "hpu/core/tensor/tensor.h"
#include "hpu/device/kernels/gemm.h"
#include "hpu/device/element_loops.h"

namespace hpu::core::ops::detail {

using autograd::GradRef;
using autograd::GradTarget;
using autograd::gradTarget;
using autograd::gradWritten;

// Throws Error("<op>: <what>") unless `ok`. `what` is a string, or a
// function making one (then formatted only on failure).
template <class What>
void require(bool ok, std::string_view op, const What& what) {
  if (ok) return;
  if constexpr (std::is_invocable_v<What>)
    throw Error(fmt::format("{}: {}", op, what()));
  else
    throw Error(fmt::format("{}: {}", op, what));
}
template <class What>
void require(bool ok, const OpInfo& op, const What& what) {
  require(ok, op.str(), what);
}

// Whether ops on `t` compute values (false on a shape-only device).
inline bool computes(const Tensor& t) { return !t.shapeOnly(); }
inline bool computes(const GradRef& t) { return !t.shapeOnly(); }

// Records an op on the device of its first defined operand; the record must
// live until the op returns (see OpRecord).
OpRecord record(device::OpName name, std::initializer_list<const Tensor*> operands);
inline OpRecord record(const OpInfo& op, std::initializer_list<const Tensor*> operands) {
  return record(op.name, operands);
}
// The same for operands a fused op never materialises (their shapes must
// outlive the record).
OpRecord record(const OpInfo& op, device::Device& device, std::span<const device::OperandInfo> operands);

// The dtype `op` runs in under the current autocast state: from the widest
// floating dtype of the inputs (fp32 if two half types mix).
DType computeDtype(const OpInfo& op, std::span<const Tensor* const> inputs);
inline DType computeDtype(const OpInfo& op, std::initializer_list<const Tensor*> inputs) {
  return computeDtype(op, std::span<const Tensor* const>(inputs.begin(), inputs.size()));
}
// A differentiable cast: a copy rounded to `dt` (x itself if it already is,
// or is not floating).
Tensor castTo(const Tensor& x, DType dt);

// A new tensor on t's device with t's (floating) dtype.
Tensor like(const Tensor& t, const Shape& shape);
// The output of an op written over `input`, when the op is its last use, as a
// graph compiler reuses a tensor's memory: `input` handed over (nothing else
// holds it: Tensor::soleOwner), floating, and no backward of the op's
// `inputs` to record. Then `input` is released and the result (its shape and
// dtype) owns its memory; otherwise the result is undefined and `input` kept.
Tensor takeOverAtLastUse(Tensor& input, std::initializer_list<const Tensor*> inputs);
// The same for an elementwise `op` of `input` and `other`: only when they
// have one shape, `input` already has the op's dtype (no cast), and `other`
// is not `input` itself (it is read while the output is written).
Tensor takeOverAtLastUse(const OpInfo& op, Tensor& input, const Tensor& other);
// Rounds an op's output to its dtype (kernels compute in fp32).
Tensor finish(Tensor y);
// A scalar (shape []) holding `value`.
Tensor scalar(device::Device& dev, double value);

// Whether t is defined and requires a gradient.
bool wants(const Tensor& t);
bool wants(const GradRef& t);
// Marks `out` as requiring a gradient and counts the inputs' uses.
void track(Tensor& out, std::span<const Tensor* const> inputs);
// Records `backward` for `out` when any input needs a gradient (track()),
// traced as `op`'s backward, of the OpEvent `forward_op` (0: none, priced as
// nothing of its own). Under anomaly detection the output is noted and the
// backward checks the gradients it wrote (autograd::AnomalyDetection).
// (Also for a varying number of inputs, as a span.)
template <class Backward>
void recordBackwardAs(std::string_view op, std::uint64_t forward_op, Tensor& out,
                      std::span<const Tensor* const> inputs, Backward backward) {
  if (!autograd::needsGrad(inputs)) return;
  track(out, inputs);
  if (!autograd::anomalyDetection()) {
    autograd::currentTape()->record(std::move(backward), op, forward_op);
    return;
  }
  autograd::noteForwardOutput(out, op);
  std::vector<GradRef> checked;
  for (const Tensor* t : inputs)
    if (t != nullptr && t->defined() && t->requiresGrad()) checked.push_back(*t);
  autograd::currentTape()->record(
      [backward = std::move(backward), checked = std::move(checked), op]() mutable {
        backward();
        autograd::checkInputGradients(checked, op);
      },
      op, forward_op);
}
// The backward of the op just recorded (its OpRecord is the last one).
template <class Backward>
void recordBackwardAs(std::string_view op, std::uint64_t forward_op, Tensor& out,
                      std::initializer_list<const Tensor*> inputs, Backward backward) {
  recordBackwardAs(op, forward_op, out, std::span<const Tensor* const>(inputs.begin(), inputs.size()),
                   std::move(backward));
}
template <class Backward>
void recordBackward(Tensor& out, std::span<const Tensor* const> inputs, Backward backward) {
  recordBackwardAs(lastRecordedOp(), lastRecordedOpId(), out, inputs, std::move(backward));
}
template <class Backward>
void recordBackward(Tensor& out, std::initializer_list<const Tensor*> inputs, Backward backward) {
  recordBackwardAs(lastRecordedOp(), lastRecordedOpId(), out, inputs, std::move(backward));
}
// The backward of an op that records no device op of its own (a view; a
// collective's wrapper, whose collectives are recorded as such): traced
// under `op` (a literal), priced as nothing, and not as the op recorded
// before it.
template <class Backward>
void recordUnrecordedBackward(std::string_view op, Tensor& out, std::initializer_list<const Tensor*> inputs,
                              Backward backward) {
  recordBackwardAs(op, 0, out, inputs, std::move(backward));
}

// The gradient targets of an input, a weight and a bias that one kernel
// writes together; an undefined or frozen one gets {nullptr, false}.
struct GradTargets {
  GradTarget x, w, b;
};
GradTargets gradTargets(const GradRef& x, const GradRef& w, const GradRef& b);
// gradWritten() for each of them that wants a gradient.
void gradsWritten(const GradRef& x, const GradRef& w, const GradRef& b);

// t's gradient (+)= src (t.numel() values).
void accumulateGrad(const GradRef& t, const float* src);
// t's gradient (+)= scale * src (src itself when scale is 1).
void accumulateScaledGrad(const GradRef& t, const float* src, float scale);
// target's gradient (+)= op(a) op(b), a GEMM into the gradient buffer.
void gemmGrad(const GradRef& target, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
              const float* b, device::kernels::GemmOperands operands = device::kernels::GemmOperands::kFloat32);
// The GEMM operands of tensors of these dtypes: bfloat16 when all are.
device::kernels::GemmOperands gemmOperands(std::initializer_list<DType> dtypes);

}  // namespace hpu::core::ops::detail
