// Reverse-mode autograd on a tape. While a TapeScope is active on a thread,
// every op whose inputs require gradients appends a backward function to the
// tape; Tape::backward() runs them in reverse order. Outside a TapeScope
// (evaluation, inference) nothing is recorded and no activation is kept.
//
// A backward function reads its output's gradient and adds into its inputs'
// gradients (gradTarget() tells it whether to overwrite or accumulate).
// Thread-safety: a tape belongs to one thread; the current tape is
// thread-local.
#pragma once

#include <functional>
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
bool needsGrad(std::initializer_list<const Tensor*> inputs);

// Where a backward function writes the gradient of `t`: the buffer (created
// uninitialised on first use) and whether to accumulate into it (false the
// first time in a step: overwrite). Marks the gradient valid.
struct GradTarget {
  float* data;  // null on a shape-only device: nothing to compute
  bool accumulate;
};
GradTarget gradTarget(const Tensor& t);

// Gradient-readiness bookkeeping for leaves with an on_grad_ready hook:
// ops call noteUse() for each input when they record, backward functions call
// gradWritten() after writing an input's gradient; the hook fires when the
// last recorded use has been back-propagated.
void noteUse(const Tensor& t);
void gradWritten(const Tensor& t);

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
void checkInputGradients(const std::vector<Tensor>& inputs, std::string_view op);

}  // namespace hpu::core::autograd
