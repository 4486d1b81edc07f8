// Reverse-mode autograd on a tape. While a TapeScope is active on a thread,
// every op whose inputs require gradients appends a backward function to the
// tape; Tape::backward() runs them in reverse order, releasing each once it
// has run. Outside a TapeScope (evaluation, inference) nothing is recorded and
// no activation is kept.
//
// A backward function reads its output's gradient and adds into its inputs'
// gradients (gradTarget() tells it whether to overwrite or accumulate). It
// holds a Tensor only where its formula reads the values (a product's
// operands, softmax's output); the tensors it only routes gradients through
// it holds as GradRefs, so their memory goes at their last forward use, as
// PyTorch's autograd keeps only what a formula saves.
// Thread-safety: a tape belongs to one thread; the current tape is
// thread-local.
#pragma once

#include <functional>
#include <initializer_list>
#include <span>
#include <string_view>
#include <vector>

#include "hpu/core/tensor/tensor.h"

namespace hpu::core::autograd {

class Tape {
 public:
  using Backward = std::function<void()>;

  // `op` names the function for profilers ("linear": traced as linear's
  // backward); it must outlive the tape (a literal). `forward_op` is the
  // OpEvent::id of the op it differentiates (0: none).
  // `fn` is destroyed right after it runs (with what it holds).
  void record(Backward fn, std::string_view op = "backward_hook", std::uint64_t forward_op = 0) {
    entries_.push_back({std::move(fn), op, forward_op});
  }
  // Seeds d(root)/d(root) = `seed` (a loss scale for mixed precision), runs
  // every recorded function in reverse and clears the tape (releasing the
  // activations it kept). REQUIRES: root is a scalar that requires grad.
  void backward(const Tensor& root, float seed = 1.0f);
  // Seeds root's gradient with `grad` (same shape) instead, for a recorded
  // sub-computation (activation checkpointing).
  void backward(const Tensor& root, const Tensor& grad);
  void clear() { entries_.clear(); }
  std::size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    Backward fn;
    std::string_view op;
    std::uint64_t forward_op;
  };
  // Runs the entries in reverse, each reported to the thread's OpObserver.
  void runBackward();

  std::vector<Entry> entries_;
};

// The tape ops record into on this thread, or nullptr (no recording).
Tape* currentTape();

// Makes `tape` (or nullptr: no recording) current for its lifetime.
class TapeScope {
 public:
  explicit TapeScope(Tape* tape);
  ~TapeScope();
  TapeScope(const TapeScope&) = delete;
  TapeScope& operator=(const TapeScope&) = delete;

 private:
  Tape* previous_;
};

// True when an op on these inputs must record its backward.
bool needsGrad(std::span<const Tensor* const> inputs);
inline bool needsGrad(std::initializer_list<const Tensor*> inputs) {
  return needsGrad(std::span<const Tensor* const>(inputs.begin(), inputs.size()));
}

// What a backward function holds of a tensor whose values it does not read:
// the tensor's gradient, shape, dtype and device, not its values (see the
// top of this file). Converts from a Tensor, sharing its gradient, so the
// gradient functions below take either. Off a tape (no TapeScope, as in
// evaluation and inside backward functions) a tensor that has never
// required a gradient converts without one (requiresGrad() is false, no
// gradient can be asked of it): nothing will be recorded for it.
class GradRef {
 public:
  GradRef() = default;
  GradRef(const Tensor& t);  // NOLINT(google-explicit-constructor): see above

  bool defined() const { return device_ != nullptr; }
  bool requiresGrad() const { return state_ != nullptr && state_->requires_grad; }
  // As Tensor::grad(): this step's gradient, or undefined.
  Tensor grad() const;
  const Shape& shape() const { return shape_; }
  std::int64_t numel() const { return shape_.numel(); }
  DType dtype() const { return dtype_; }
  device::Device& device() const { return *device_; }
  bool shapeOnly() const { return device_->shapeOnly(); }

 private:
  friend struct GradRefAccess;
  std::shared_ptr<detail::AutogradState> state_;
  Shape shape_;
  DType dtype_ = DType::kFloat32;
  device::Device* device_ = nullptr;
};

// Where a backward function writes the gradient of `t`: the buffer (created
// uninitialised on first use) and whether to accumulate into it (false the
// first time in a step: overwrite). Marks the gradient valid.
struct GradTarget {
  float* data;  // null on a shape-only device: nothing to compute
  bool accumulate;
};
GradTarget gradTarget(const GradRef& t);

// Gradient-readiness bookkeeping for leaves with an on_grad_ready hook:
// ops call noteUse() for each input when they record, backward functions call
// gradWritten() after writing an input's gradient; the hook fires when the
// last recorded use has been back-propagated.
void noteUse(const Tensor& t);
void gradWritten(const GradRef& t);

// Anomaly detection (trainer.detect_anomaly). While an AnomalyDetection is
// alive on a thread, every recorded op's output is checked for nan and inf
// before backward runs (in the order the ops ran), and every backward
// function's input gradients after it ran (in backward's order); the first
// op found is named in an Error. Costs a pass over every checked tensor.
class AnomalyDetection {
 public:
  AnomalyDetection();
  ~AnomalyDetection();
  AnomalyDetection(const AnomalyDetection&) = delete;
  AnomalyDetection& operator=(const AnomalyDetection&) = delete;

 private:
  bool previous_;
};
bool anomalyDetection();
// Ops call these (through ops::detail::recordBackward) when detection is on.
void noteForwardOutput(const Tensor& out, std::string_view op);
void checkInputGradients(const std::vector<GradRef>& inputs, std::string_view op);

}  // namespace hpu::core::autograd
