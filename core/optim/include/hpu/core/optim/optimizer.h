// Optimizers step flat slices of parameter storage (whole buckets for
// single-device and DDP training, this rank's shards under ZeRO). State
// (momentum, Adam moments) lives on the device beside the parameters, one
// buffer per slice, so device memory statistics account for it.
//
// Construction takes only hyper-parameters (from a config or from a model's
// configureOptimizers); attach() binds the parameter slices later.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hpu/core/optim/state_buffer.h"
#include "hpu/core/tensor/tensor.h"

namespace hpu::core::optim {

struct ParamSlice {
  float* values;
  const float* grads;
  std::int64_t numel;
  DType dtype;  // the parameters' dtype: values are rounded to it after an update
  // The values are a half-precision model's (DeepSpeed's bf16 and fp16
  // modes): the optimizer steps fp32 master weights kept in its state
  // ("master", from the values at attach) and writes them into the values
  // rounded to dtype. Either every slice of an optimizer has one or none.
  bool master = false;
};

class Optimizer {
 public:
  explicit Optimizer(double lr) : lr_(lr), initial_lr_(lr) {}
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;

  // Binds the slices to update and allocates their state on `device`, or in
  // host memory with `offload` (ZeRO-Offload: the device holds none of it).
  void attach(std::vector<ParamSlice> slices, device::Device& device, bool offload = false);
  bool attached() const { return !slices_.empty() || attached_empty_; }
  // One update of every slice from its gradient.
  void step();

  double lr() const { return lr_; }
  void setLr(double lr) { lr_ = lr; }
  // What torch's param_group shows beside the lr (LearningRateMonitor logs
  // them, OneCycleLR cycles the momentum): the momentum (SGD's, RMSprop's;
  // Adam's beta1, its betas[0]), nullopt for an optimizer without one; and
  // the weight decay.
  virtual std::optional<double> momentum() const { return std::nullopt; }
  // REQUIRES: momentum() has a value. Used from the next step on.
  virtual void setMomentum(double) {}
  virtual double weightDecay() const = 0;
  double initialLr() const { return initial_lr_; }
  // The lr as if the optimizer had been made with it (a scheduler attached
  // later starts from it).
  void resetLr(double lr) { lr_ = initial_lr_ = lr; }
  std::int64_t stepCount() const { return step_; }
  void setStepCount(std::int64_t s) { step_ = s; }

  // The parameter values were replaced (checkpoint weights): fp32 master
  // weights start again from them.
  void parametersLoaded();
  // State buffers by name ("exp_avg.0": slice 0; "master.0" with master
  // weights), for checkpoints.
  struct NamedState {
    std::string name;
    std::span<float> values;
  };
  std::vector<NamedState> stateBuffers();

 protected:
  // Names of the state buffers each slice needs ({"momentum_buffer"}, ...).
  virtual std::vector<std::string> stateNames() const = 0;
  // Updates one slice; `state` has one pointer per stateNames() entry.
  // `step` counts from 1.
  virtual void update(const ParamSlice& s, float* const* state, std::int64_t step) = 0;

 private:
  double lr_;
  double initial_lr_;
  std::int64_t step_ = 0;
  std::vector<ParamSlice> slices_;
  std::vector<std::vector<StateBuffer>> state_;  // [slice][state buffer], then the master if any
  bool attached_empty_ = false;
  bool shape_only_ = false;  // attached on a shape-only device: step() updates nothing
  device::Device* device_ = nullptr;  // where step() is recorded
  bool offload_ = false;
  bool masters_ = false;  // fp32 master weights: the last state buffer of each slice
};

struct SGDOptions {
  double lr = 0.001;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};
std::unique_ptr<Optimizer> makeSGD(const SGDOptions& o);

struct RMSpropOptions {
  double lr = 0.01;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double momentum = 0.0;
  bool centered = false;
};
std::unique_ptr<Optimizer> makeRMSprop(const RMSpropOptions& o);

struct AdagradOptions {
  double lr = 0.01;
  double lr_decay = 0.0;
  double weight_decay = 0.0;
  double initial_accumulator_value = 0.0;
  double eps = 1e-10;
};
std::unique_ptr<Optimizer> makeAdagrad(const AdagradOptions& o);

struct AdamOptions {
  double lr = 0.001;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled_weight_decay = false;  // true: AdamW
};
std::unique_ptr<Optimizer> makeAdam(const AdamOptions& o);
// AdamW: decoupled weight decay (default 0.01), as torch.optim.AdamW.
std::unique_ptr<Optimizer> makeAdamW(AdamOptions o);

}  // namespace hpu::core::optim
