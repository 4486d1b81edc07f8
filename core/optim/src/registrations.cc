// Optimizers and LR schedulers selectable from a config (optimizer:,
// lr_scheduler:), under their torch class paths too.
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

config::ParamSpec verboseParam() {
  return {"verbose", Type::anyOf({Type::boolean(), Type::string({"deprecated"})}), "deprecated",
          "true: print each lr change as torch does (deprecated: false)."};
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
                       [](const Params& p) { return makeAdam(adamOptions(p)); });

HPU_REGISTER_COMPONENT(Optimizer,
                       ComponentSchema{ComponentKind::kOptimizer,
                                       "AdamW",
                                       "torch.optim",
                                       {"AdamW", "", adamParams("0.01", true)},
                                       "Adam with decoupled weight decay (torch.optim.AdamW)."},
                       [](const Params& p) { return makeAdamW(adamOptions(p)); });

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
