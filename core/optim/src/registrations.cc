// Optimizers and LR schedulers selectable from a config (optimizer:,
// lr_scheduler:), under their torch class paths too.
#include <spdlog/fmt/fmt.h>

#include <algorithm>

#include "hpu/core/config/registry.h"
#include "hpu/core/optim/lr_scheduler.h"
#include "hpu/core/optim/optimizer.h"

namespace hpu::core::optim {
namespace {

using config::ComponentKind;
using config::ComponentSchema;
using config::Params;
using config::Type;

Type positive() { return Type::real().min(0.0, true); }
Type nonNegative() { return Type::real().min(0.0); }
Type unit() { return Type::real().min(0.0).max(1.0, true); }

// torch's optimizer keys that choose an implementation, not the math: any
// value runs hpu-train's one fused step.
config::ParamSpec foreachParam() {
  return {"foreach", Type::optional(Type::boolean()), "null",
          "torch's multi-tensor implementation switch; hpu-train always runs one fused step (same math)."};
}
config::ParamSpec fusedParam() {
  return {"fused", Type::optional(Type::boolean()), "null",
          "torch's fused-kernel switch; hpu-train always runs one fused step (same math)."};
}
// torch's optimizer keys that would change the math: their defaults only.
config::ParamSpec maximizeParam() {
  return {"maximize", Type::boolean(), "false", "Ascend instead of descend.",
          "hpu-train's optimizers minimize the loss; return its negative from the model instead"};
}
config::ParamSpec capturableParam() {
  return {"capturable", Type::boolean(), "false", "Keep the step count on the device for CUDA graph capture.",
          "CUDA graph capture of the optimizer step has no HPU counterpart; lazy mode records the step's graph itself"};
}
config::ParamSpec differentiableParam() {
  return {"differentiable", Type::boolean(), "false", "Record the optimizer step in autograd.",
          "hpu-train does not differentiate through optimizer steps (no higher-order training)"};
}

// torch 2.13 removed `verbose` from its schedulers (deprecated since 2.2):
// kept as hpu-train's own, so configs printed with an older torch
// (verbose: deprecated) still load, and printed only when set.
config::ParamSpec verboseParam() {
  return {"verbose", Type::anyOf({Type::boolean(), Type::string({"deprecated"})}), "deprecated",
          "true: print each lr change as torch < 2.7 did (deprecated: false).", "", true};
}

// A torch.optim.lr_scheduler class; its init_args end with torch's
// last_epoch and verbose.
ComponentSchema schedulerSchema(const char* name, std::vector<config::ParamSpec> params, const char* doc) {
  params.push_back({"last_epoch", Type::integer().min(-1), "-1", "The epoch to resume from (-1: start).",
                    "resuming a schedule is ckpt_path's job, which restores the scheduler's state"});
  params.push_back(verboseParam());
  return ComponentSchema{ComponentKind::kLRScheduler, name, "torch.optim.lr_scheduler", {name, "", std::move(params)}, doc};
}

// A scheduler built by `make` from its init_args, printing lr changes when
// init_args.verbose is true.
template <class Make>
auto scheduler(Make make) {
  return [make](const Params& p) {
    std::unique_ptr<LRScheduler> s = make(p);
    const config::Node& verbose = p.node("verbose");
    s->setVerbose(verbose.str() == "true");
    return s;
  };
}

HPU_REGISTER_COMPONENT(Optimizer,
                       ComponentSchema{ComponentKind::kOptimizer,
                                       "SGD",
                                       "torch.optim",
                                       {"SGD",
                                        "",
                                        {{"lr", positive(), "0.001", "Learning rate."},
                                         {"momentum", nonNegative(), "0.0", "Momentum factor."},
                                         {"dampening", nonNegative(), "0.0", "Dampening for momentum."},
                                         {"weight_decay", nonNegative(), "0.0", "L2 penalty."},
                                         {"nesterov", Type::boolean(), "false", "Nesterov momentum."},
                                         maximizeParam(),
                                         foreachParam(),
                                         differentiableParam(),
                                         fusedParam()}},
                                       "Stochastic gradient descent (torch.optim.SGD)."},
                       [](const Params& p) {
                         return makeSGD({p.getFloat("lr"), p.getFloat("momentum"), p.getFloat("dampening"),
                                         p.getFloat("weight_decay"), p.getBool("nesterov")});
                       });

// Adam's and AdamW's init_args, in torch's order (they differ in where
// maximize comes).
std::vector<config::ParamSpec> adamParams(const char* wd_default, bool adamw) {
  std::vector<config::ParamSpec> params{
      {"lr", positive(), "0.001", "Learning rate."},
      {"betas", Type::list(unit()), "[0.9, 0.999]", "Coefficients of the running averages of the gradient and its square."},
      {"eps", positive(), "1.0e-08", "Term added to the denominator for numerical stability."},
      {"weight_decay", nonNegative(), wd_default, "Weight decay."},
      {"amsgrad", Type::boolean(), "false", "AMSGrad variant.", "AMSGrad is not implemented; use Adam or AdamW as is"}};
  if (adamw) params.push_back(maximizeParam());
  params.push_back(foreachParam());
  if (!adamw) params.push_back(maximizeParam());
  for (config::ParamSpec p : {capturableParam(), differentiableParam(), fusedParam()}) params.push_back(std::move(p));
  // torch 2.13's Adam: AdamW's rule (weight decay applied to the weights,
  // not added to the gradient), as torch.optim.AdamW.
  if (!adamw)
    params.push_back({"decoupled_weight_decay", Type::boolean(), "false",
                      "Decay the weights directly, as AdamW, instead of adding weight_decay x weight to the gradient."});
  return params;
}

AdamOptions adamOptions(const Params& p) {
  AdamOptions o;
  o.lr = p.getFloat("lr");
  const auto betas = p.getFloatList("betas");
  if (betas.size() != 2)
    p.fail("betas", "expected 2 values [beta1, beta2], got " + std::to_string(betas.size()));
  o.beta1 = betas[0];
  o.beta2 = betas[1];
  o.eps = p.getFloat("eps");
  o.weight_decay = p.getFloat("weight_decay");
  return o;
}

HPU_REGISTER_COMPONENT(Optimizer,
                       ComponentSchema{ComponentKind::kOptimizer,
                                       "Adam",
                                       "torch.optim",
                                       {"Adam", "", adamParams("0.0", false)},
                                       "Adam with L2 weight decay (torch.optim.Adam)."},
                       [](const Params& p) {
                         AdamOptions o = adamOptions(p);
                         o.decoupled_weight_decay = p.getBool("decoupled_weight_decay");
                         return makeAdam(o);
                       });

HPU_REGISTER_COMPONENT(Optimizer,
                       ComponentSchema{ComponentKind::kOptimizer,
                                       "AdamW",
                                       "torch.optim",
                                       {"AdamW", "", adamParams("0.01", true)},
                                       "Adam with decoupled weight decay (torch.optim.AdamW)."},
                       [](const Params& p) { return makeAdamW(adamOptions(p)); });

HPU_REGISTER_COMPONENT(Optimizer,
                       ComponentSchema{ComponentKind::kOptimizer,
                                       "RMSprop",
                                       "torch.optim",
                                       {"RMSprop",
                                        "",
                                        {{"lr", positive(), "0.01", "Learning rate."},
                                         {"alpha", nonNegative(), "0.99", "Smoothing constant of the squared gradient average."},
                                         {"eps", positive(), "1.0e-08", "Term added to the denominator for numerical stability."},
                                         {"weight_decay", nonNegative(), "0", "L2 penalty."},
                                         {"momentum", nonNegative(), "0", "Momentum factor."},
                                         {"centered", Type::boolean(), "false",
                                          "Normalise by the gradient's estimated variance."},
                                         capturableParam(),
                                         foreachParam(),
                                         maximizeParam(),
                                         differentiableParam()}},
                                       "RMSprop (torch.optim.RMSprop)."},
                       [](const Params& p) {
                         return makeRMSprop({p.getFloat("lr"), p.getFloat("alpha"), p.getFloat("eps"),
                                             p.getFloat("weight_decay"), p.getFloat("momentum"), p.getBool("centered")});
                       });

HPU_REGISTER_COMPONENT(Optimizer,
                       ComponentSchema{ComponentKind::kOptimizer,
                                       "Adagrad",
                                       "torch.optim",
                                       {"Adagrad",
                                        "",
                                        {{"lr", positive(), "0.01", "Learning rate."},
                                         {"lr_decay", nonNegative(), "0", "Learning-rate decay per step."},
                                         {"weight_decay", nonNegative(), "0", "L2 penalty."},
                                         {"initial_accumulator_value", nonNegative(), "0",
                                          "Starting value of the sum of squared gradients."},
                                         {"eps", positive(), "1.0e-10", "Term added to the denominator for numerical stability."},
                                         foreachParam(),
                                         maximizeParam(),
                                         differentiableParam(),
                                         fusedParam()}},
                                       "Adagrad (torch.optim.Adagrad)."},
                       [](const Params& p) {
                         return makeAdagrad({p.getFloat("lr"), p.getFloat("lr_decay"), p.getFloat("weight_decay"),
                                             p.getFloat("initial_accumulator_value"), p.getFloat("eps")});
                       });

HPU_REGISTER_COMPONENT(LRScheduler,
                       schedulerSchema("StepLR",
                                       {{"step_size", Type::integer().min(1), "1", "Epochs between decays."},
                                        {"gamma", positive(), "0.1", "Multiplicative decay factor."}},
                                       "Decays the lr by gamma every step_size epochs."),
                       scheduler([](const Params& p) { return makeStepLR(p.getInt("step_size"), p.getFloat("gamma")); }));

HPU_REGISTER_COMPONENT(LRScheduler,
                       schedulerSchema("MultiStepLR",
                                       {{"milestones", Type::list(Type::integer().min(1)), "[]", "Epochs at which to decay."},
                                        {"gamma", positive(), "0.1", "Multiplicative decay factor."}},
                                       "Decays the lr by gamma at each milestone epoch."),
                       scheduler([](const Params& p) { return makeMultiStepLR(p.getIntList("milestones"), p.getFloat("gamma")); }));

HPU_REGISTER_COMPONENT(LRScheduler,
                       schedulerSchema("CosineAnnealingLR",
                                       {{"T_max", Type::integer().min(1), "10", "Epochs of a half cosine period."},
                                        {"eta_min", nonNegative(), "0.0", "Minimum lr."}},
                                       "Cosine annealing of the lr over T_max epochs."),
                       scheduler([](const Params& p) { return makeCosineAnnealingLR(p.getInt("T_max"), p.getFloat("eta_min")); }));

HPU_REGISTER_COMPONENT(LRScheduler,
                       schedulerSchema("ExponentialLR", {{"gamma", positive(), "null", "Multiplicative decay factor per epoch."}},
                                       "Decays the lr by gamma every epoch."),
                       scheduler([](const Params& p) { return makeExponentialLR(p.getFloat("gamma")); }));

HPU_REGISTER_COMPONENT(
    LRScheduler,
    schedulerSchema("LinearLR",
                    {{"start_factor", Type::real().min(0.0, true).max(1.0), "0.3333333333333333",
                      "Factor of the base lr at the first epoch."},
                     {"end_factor", Type::real().min(0.0).max(1.0), "1.0", "Factor of the base lr after total_iters."},
                     {"total_iters", Type::integer().min(1), "5", "Epochs of the linear change."}},
                    "Moves the lr linearly from start_factor to end_factor of the base lr (warmup)."),
    scheduler([](const Params& p) {
      return makeLinearLR(p.getFloat("start_factor"), p.getFloat("end_factor"), p.getInt("total_iters"));
    }));

HPU_REGISTER_COMPONENT(
    LRScheduler,
    schedulerSchema(
        "OneCycleLR",
        {{"max_lr", positive(), "null", "Peak learning rate."},
         {"total_steps", Type::optional(Type::integer().min(1)), "null",
          "Steps of the cycle (or epochs x steps_per_epoch); the lr_scheduler key steps once per epoch."},
         {"epochs", Type::optional(Type::integer().min(1)), "null", "With steps_per_epoch, gives total_steps."},
         {"steps_per_epoch", Type::optional(Type::integer().min(1)), "null", "With epochs, gives total_steps."},
         {"pct_start", Type::real().min(0.0).max(1.0), "0.3", "Share of the cycle spent increasing the lr."},
         {"anneal_strategy", Type::string({"cos", "linear"}), "cos", "Annealing curve."},
         {"cycle_momentum", Type::boolean(), "true", "Cycle the momentum (SGD's, Adam's beta1) inversely."},
         {"base_momentum", nonNegative(), "0.85", "Lowest momentum (at the peak lr)."},
         {"max_momentum", nonNegative(), "0.95", "Highest momentum (at the start and end)."},
         {"div_factor", positive(), "25.0", "Initial lr = max_lr / div_factor."},
         {"final_div_factor", positive(), "10000.0", "Final lr = initial lr / final_div_factor."},
         {"three_phase", Type::boolean(), "false", "Annealing back to the initial lr before the final decay."}},
        "The 1cycle policy: lr up to max_lr and down, momentum the other way."),
    scheduler([](const Params& p) {
      OneCycleOptions o;
      o.max_lr = p.getFloat("max_lr");
      if (p.has("total_steps"))
        o.total_steps = p.getInt("total_steps");
      else if (p.has("epochs") && p.has("steps_per_epoch"))
        o.total_steps = p.getInt("epochs") * p.getInt("steps_per_epoch");
      else
        p.fail("total_steps", "You must define either total_steps OR (epochs AND steps_per_epoch)");
      o.pct_start = p.getFloat("pct_start");
      o.cos_anneal = p.getString("anneal_strategy") == "cos";
      o.cycle_momentum = p.getBool("cycle_momentum");
      o.base_momentum = p.getFloat("base_momentum");
      o.max_momentum = p.getFloat("max_momentum");
      o.div_factor = p.getFloat("div_factor");
      o.final_div_factor = p.getFloat("final_div_factor");
      o.three_phase = p.getBool("three_phase");
      return makeOneCycleLR(o);
    }));

HPU_REGISTER_COMPONENT(
    LRScheduler,
    schedulerSchema("SequentialLR",
                    {{"schedulers", Type::list(Type::component({ComponentKind::kLRScheduler})), "null",
                      "The schedulers, in turn (each a {class_path, init_args} without the optimizer)."},
                     {"milestones", Type::list(Type::integer().min(1)), "null",
                      "Epochs at which the next scheduler takes over (one fewer than schedulers)."}},
                    "Runs schedulers one after another (warmup then decay)."),
    scheduler([](const Params& p) {
      const auto milestones = p.getIntList("milestones");
      const auto& nodes = p.node("schedulers").items();
      if (nodes.size() != milestones.size() + 1)
        p.fail("milestones", fmt::format("Sequential Schedulers expects number of schedulers provided to be one more than "
                                         "the number of milestone points, but got number of schedulers {} and the "
                                         "number of milestones to be equal to {}",
                                         nodes.size(), milestones.size()));
      if (!std::is_sorted(milestones.begin(), milestones.end()))
        p.fail("milestones", "milestones must increase");
      std::vector<std::unique_ptr<LRScheduler>> schedulers;
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        const std::string where = p.pathOf("schedulers") + "[" + std::to_string(i) + "]";
        schedulers.push_back(config::ComponentFactory<LRScheduler>::instance().create(nodes[i], where));
        const LRScheduler& s = *schedulers.back();
        if (s.interval() != LRScheduler::Interval::kEpoch || !s.monitor().empty())
          p.fail("schedulers", s.name() + " cannot run inside SequentialLR: it " +
                                   (s.monitor().empty() ? "steps every optimizer step" : "needs a monitored metric"));
      }
      return makeSequentialLR(std::move(schedulers), milestones);
    }));

HPU_REGISTER_COMPONENT(
    LRScheduler,
    ComponentSchema{ComponentKind::kLRScheduler,
                    "WarmupDecayLR",
                    "deepspeed.runtime.lr_schedules",
                    {"WarmupDecayLR",
                     "",
                     {{"warmup_min_lr", nonNegative(), "0.0", "Lr at the start of warmup."},
                      {"warmup_max_lr", positive(), "0.001", "Lr at the end of warmup."},
                      {"warmup_num_steps", Type::integer().min(1), "1000", "Optimizer steps of warmup."},
                      {"total_num_steps", Type::integer().min(1), "10000", "Optimizer step at which the lr reaches 0."},
                      {"warmup_type", Type::string({"log", "linear"}), "log", "Warmup curve."}}},
                    "DeepSpeed's linear warmup then linear decay, stepped every optimizer step."},
    [](const Params& p) {
      return makeWarmupDecayLR({p.getFloat("warmup_min_lr"), p.getFloat("warmup_max_lr"), p.getInt("warmup_num_steps"),
                                p.getInt("total_num_steps"), p.getString("warmup_type") == "log"});
    });

HPU_REGISTER_COMPONENT(
    LRScheduler,
    ComponentSchema{ComponentKind::kLRScheduler,
                    "ReduceLROnPlateau",
                    "lightning.pytorch.cli",
                    {"ReduceLROnPlateau",
                     "",
                     {{"monitor", Type::string(), "val_loss", "Logged metric to watch (Lightning's monitor)."},
                      {"mode", Type::string({"min", "max"}), "min", "Whether the metric should decrease or increase."},
                      {"factor", unit(), "0.1", "Factor by which the lr is reduced."},
                      {"patience", Type::integer().min(0), "10", "Epochs without improvement before reducing."},
                      {"threshold", nonNegative(), "0.0001", "Minimal significant change."},
                      {"threshold_mode", Type::string({"rel", "abs"}), "rel", "Relative or absolute threshold."},
                      {"cooldown", Type::integer().min(0), "0", "Epochs to wait after a reduction."},
                      {"min_lr", nonNegative(), "0.0", "Lower bound of the lr."},
                      {"eps", nonNegative(), "1.0e-08", "Minimal lr change applied."},
                      verboseParam()}},
                    "Reduces the lr when a monitored metric stops improving (lightning.pytorch.cli's, torch's with "
                    "a monitor)."},
    scheduler([](const Params& p) {
      PlateauOptions o;
      o.monitor = p.getString("monitor");
      o.mode_max = p.getString("mode") == "max";
      o.factor = p.getFloat("factor");
      o.patience = p.getInt("patience");
      o.threshold = p.getFloat("threshold");
      o.threshold_rel = p.getString("threshold_mode") == "rel";
      o.cooldown = p.getInt("cooldown");
      o.min_lr = p.getFloat("min_lr");
      o.eps = p.getFloat("eps");
      return makeReduceLROnPlateau(o);
    }));

}  // namespace
}  // namespace hpu::core::optim
