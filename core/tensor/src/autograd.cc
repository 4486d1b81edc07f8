#include "hpu/core/tensor/autograd.h"

#include <spdlog/fmt/fmt.h>

#include <cmath>

#include "hpu/core/base/errors.h"

#include "hpu/core/tensor/op_record.h"
#include "hpu/device/check.h"
#include "hpu/device/numerics.h"
#include "tensor_access.h"

namespace hpu::core::autograd {
namespace {
thread_local Tape* tls_tape = nullptr;

struct ForwardOutput {
  Tensor tensor;
  std::string_view op;
};
thread_local bool tls_anomaly = false;
thread_local std::vector<ForwardOutput> tls_forward_outputs;

// "nan" or "inf" when `t` holds one (nan first), else nullptr.
const char* nonFinite(const Tensor& t) {
  if (!t.defined() || t.shapeOnly() || !device::isFloating(t.dtype())) return nullptr;
  const char* found = nullptr;
  const float* v = t.data();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (std::isnan(v[i])) return "nan";
    if (std::isinf(v[i])) found = "inf";
  }
  return found;
}

// Checks the outputs noted since the last backward, in the order the ops ran.
void checkForwardOutputs() {
  std::vector<ForwardOutput> outputs = std::move(tls_forward_outputs);
  tls_forward_outputs.clear();
  for (const ForwardOutput& o : outputs)
    if (const char* what = nonFinite(o.tensor))
      throw Error(fmt::format("trainer.detect_anomaly: '{}' produced {} values in the forward pass, the first op of "
                              "the step that did",
                              o.op, what));
}
}  // namespace

AnomalyDetection::AnomalyDetection() : previous_(tls_anomaly) {
  tls_anomaly = true;
  tls_forward_outputs.clear();
}
AnomalyDetection::~AnomalyDetection() {
  tls_anomaly = previous_;
  tls_forward_outputs.clear();
}
bool anomalyDetection() { return tls_anomaly; }

void noteForwardOutput(const Tensor& out, std::string_view op) { tls_forward_outputs.push_back({out, op}); }

void checkInputGradients(const std::vector<GradRef>& inputs, std::string_view op) {
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (const char* what = nonFinite(inputs[i].grad()))
      throw Error(fmt::format("trainer.detect_anomaly: the backward of '{}' returned {} values in the gradient of its "
                              "input {} (its forward's outputs were finite)",
                              op, what, i));
}

Tape* currentTape() { return tls_tape; }

TapeScope::TapeScope(Tape* tape) : previous_(tls_tape) { tls_tape = tape; }
TapeScope::~TapeScope() { tls_tape = previous_; }

bool needsGrad(std::span<const Tensor* const> inputs) {
  if (tls_tape == nullptr) return false;
  for (const Tensor* t : inputs)
    if (t != nullptr && t->defined() && t->requiresGrad()) return true;
  return false;
}

using detail::TensorAccess;

struct GradRefAccess {
  static detail::AutogradState& state(const GradRef& r) {
    HPU_CHECK(r.state_ != nullptr, "a gradient asked of a tensor {} that has no autograd state", r.shape().str());
    return *r.state_;
  }
};

GradRef::GradRef(const Tensor& t) {
  if (!t.defined()) return;
  shape_ = t.shape();
  dtype_ = t.dtype();
  device_ = &t.device();
  // Off a tape nothing is recorded (evaluation, or a backward function
  // naming a tensor it holds): a tensor without state needs none.
  if (tls_tape != nullptr || TensorAccess::hasAutograd(t)) state_ = TensorAccess::sharedAutograd(t);
}

Tensor GradRef::grad() const { return TensorAccess::gradOf(state_.get()); }

GradTarget gradTarget(const GradRef& t) {
  detail::AutogradState& state = GradRefAccess::state(t);
  if (!state.grad && state.on_grad_needed) state.on_grad_needed();
  if (!state.grad) {
    const Tensor grad =
        Tensor::empty(t.device(), t.shape(), device::isFloating(t.dtype()) ? t.dtype() : DType::kFloat32);
    state.grad = TensorAccess::shared(grad);
    state.grad_valid = false;
  }
  const bool accumulate = state.grad_valid;
  state.grad_valid = true;
  return {TensorAccess::wrap(state.grad).data(), accumulate};
}

void noteUse(const Tensor& t) {
  if (!t.defined()) return;
  detail::AutogradState& state = TensorAccess::autograd(t);
  if (state.on_grad_ready) ++state.pending_uses;
}

void gradWritten(const GradRef& t) {
  detail::AutogradState& state = GradRefAccess::state(t);
  if (state.grad && state.grad->dtype != DType::kFloat32 && !t.shapeOnly())
    device::roundInPlace(TensorAccess::wrap(state.grad).values(), state.grad->dtype);
  if (state.on_grad_ready && --state.pending_uses == 0) state.on_grad_ready();
}

void Tape::backward(const Tensor& root, float seed) {
  HPU_CHECK(root.numel() == 1 && root.requiresGrad(), "backward() of a tensor of shape {} (requires_grad={})",
            root.shape().str(), root.requiresGrad());
  GradTarget g = gradTarget(root);
  if (g.data != nullptr) g.data[0] = g.accumulate ? g.data[0] + seed : seed;
  runBackward();
}

void Tape::backward(const Tensor& root, const Tensor& grad) {
  HPU_CHECK(root.shape() == grad.shape(), "gradient {} for a tensor {}", grad.shape().str(), root.shape().str());
  if (root.requiresGrad()) {
    GradTarget g = gradTarget(root);
    const float* src = grad.data();
    if (g.data != nullptr)
      for (std::int64_t i = 0; i < root.numel(); ++i) g.data[i] = g.accumulate ? g.data[i] + src[i] : src[i];
  }
  runBackward();
}

void Tape::runBackward() {
  if (tls_anomaly) checkForwardOutputs();
  TapeScope no_record(nullptr);  // backward functions never record
  ops::OpObserver* observer = ops::currentOpObserver();
  // Each function is released once it has run: what it held (saved values,
  // its output's gradient) goes then, not at the end of backward.
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    const Backward fn = std::move(it->fn);
    it->fn = nullptr;
    if (observer == nullptr) {
      fn();
      continue;
    }
    const auto begin = std::chrono::steady_clock::now();
    fn();
    observer->onOp({.op = it->op,
                    .backward = true,
                    .id = it->forward_op,
                    .begin = begin,
                    .end = std::chrono::steady_clock::now()});
  }
  entries_.clear();
}

}  // namespace hpu::core::autograd
