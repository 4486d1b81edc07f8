// Optimizers step flat slices of parameter storage (whole buckets for
// single-device and DDP training, this rank's shards under ZeRO). State
// (momentum, Adam moments) lives on the device beside the parameters, one
// buffer per slice, so device memory statistics account for it.
//
// Construction takes only hyper-parameters (from a config or from a model's
// configureOptimizers); attach() binds the parameter slices later.
//
// Parameter groups (torch's param_groups): group 0 has the optimizer's lr
// (lr(), setLr(): what schedulers and the Trainer drive); addGroup() adds
// one with its own lr and step count, whose state starts afresh, as torch's
// add_param_group. setGroupRanges() says which group steps each element
// range of a slice; a range in no group is frozen: neither it nor its state
// changes. State buffers span whole slices either way, so a checkpoint's
// layout does not depend on the groups.
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

// An element range of a slice and the parameter group that steps it.
struct GroupRange {
  std::int64_t offset = 0;
  std::int64_t numel = 0;
  std::size_t group = 0;
};

class Optimizer {
 public:
  explicit Optimizer(double lr) : groups_{{lr, 0}}, initial_lr_(lr) {}
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;

  // Binds the slices to update and allocates their state on `device`, or in
  // host memory with `offload` (ZeRO-Offload: the device holds none of it).
  void attach(std::vector<ParamSlice> slices, device::Device& device, bool offload = false);
  bool attached() const { return !slices_.empty() || attached_empty_; }
  // One update of every slice from its gradient.
  void step();

  double lr() const { return groups_[0].lr; }
  void setLr(double lr) { groups_[0].lr = lr; }
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
  void resetLr(double lr) { groups_[0].lr = initial_lr_ = lr; }
  std::int64_t stepCount() const { return groups_[0].step; }
  void setStepCount(std::int64_t s) { groups_[0].step = s; }

  // A new parameter group with `lr`; returns its index. It steps nothing
  // until setGroupRanges() gives it ranges.
  std::size_t addGroup(double lr);
  // Back to group 0 alone (a checkpoint's groups are about to be restored).
  void removeAddedGroups() {
    groups_.resize(1);
    ranges_.clear();
  }
  std::size_t numGroups() const { return groups_.size(); }
  double groupLr(std::size_t g) const { return groups_.at(g).lr; }
  void setGroupLr(std::size_t g, double lr) { groups_.at(g).lr = lr; }
  std::int64_t groupStepCount(std::size_t g) const { return groups_.at(g).step; }
  void setGroupStepCount(std::size_t g, std::int64_t s) { groups_.at(g).step = s; }
  // Per slice, the ranges each group steps, in order and disjoint; elements
  // in none are frozen. Empty (the default): every slice whole in group 0.
  // REQUIRES: attached, one entry per slice, groups that exist.
  void setGroupRanges(std::vector<std::vector<GroupRange>> per_slice);

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
  // Updates one slice (or a group's range of one) with learning rate `lr`;
  // `state` has one pointer per stateNames() entry. `step` counts the
  // group's steps from 1.
  virtual void update(const ParamSlice& s, float* const* state, std::int64_t step, double lr) = 0;

 private:
  struct Group {
    double lr;
    std::int64_t step;
  };
  std::vector<Group> groups_;  // [0]: the optimizer's own lr and step count
  double initial_lr_;
  std::vector<ParamSlice> slices_;
  std::vector<std::vector<GroupRange>> ranges_;  // per slice; empty: all slices whole in group 0
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
  bool decoupled_weight_decay = false;  // true: AdamW's rule (torch.optim.Adam's decoupled_weight_decay)
};
std::unique_ptr<Optimizer> makeAdam(const AdamOptions& o);
// AdamW: decoupled weight decay (default 0.01), as torch.optim.AdamW.
std::unique_ptr<Optimizer> makeAdamW(AdamOptions o);

}  // namespace hpu::core::optim
