// LearningRateMonitor: logs the optimizer's learning rate as "lr-<Optimizer>"
// every log_every_n_steps steps (logging_interval: step), at the start of
// every epoch (epoch), or, unset, at its scheduler's interval (both when it
// has no scheduler), as Lightning does; with log_momentum and
// log_weight_decay also "lr-<Optimizer>-momentum" (Adam's beta1) and
// "lr-<Optimizer>-weight_decay".
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "hpu/core/config/registry.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/optim/lr_scheduler.h"
#include "hpu/core/trainer/trainer.h"

namespace hpu::core {
namespace {

class LearningRateMonitor final : public Callback {
 public:
  explicit LearningRateMonitor(const config::Params& p)
      : interval_(p.has("logging_interval") ? p.getString("logging_interval") : ""),
        log_momentum_(p.getBool("log_momentum")),
        log_weight_decay_(p.getBool("log_weight_decay")) {}
  std::string stateKey() const override { return "LearningRateMonitor"; }

  void setup(Trainer& trainer, data::Stage) override {
    if (trainer.loggers().empty())
      throw UsageError("Cannot use `LearningRateMonitor` callback with `Trainer` that has no logger.");
  }
  void onFitStart(Trainer& trainer) override {
    if (log_momentum_ && trainer.optimizer() != nullptr && !trainer.optimizer()->momentum() && trainer.isGlobalZero())
      spdlog::warn(
          "You have set log_momentum=True, but some optimizers do not have momentum. This will log a value 0 for the "
          "momentum.");
  }
  void onTrainEpochStart(Trainer& trainer) override {
    if (interval_ != "step" && followsScheduler(trainer, optim::LRScheduler::Interval::kEpoch)) log(trainer);
  }
  void onTrainBatchStart(Trainer& trainer, std::int64_t) override {
    // Lightning's cadence: before steps log_every_n_steps - 1, 2 log_every_n_steps - 1, ...
    if (interval_ != "epoch" && (trainer.globalStep() + 1) % trainer.options().log_every_n_steps == 0 &&
        followsScheduler(trainer, optim::LRScheduler::Interval::kStep))
      log(trainer);
  }

 private:
  // With logging_interval unset, an optimizer with a scheduler is logged at
  // the scheduler's interval, one without at every opportunity.
  bool followsScheduler(Trainer& trainer, optim::LRScheduler::Interval at) const {
    return !interval_.empty() || trainer.scheduler() == nullptr || trainer.scheduler()->interval() == at;
  }
  void log(Trainer& trainer) {
    const optim::Optimizer* opt = trainer.optimizer();
    if (opt == nullptr) return;
    // Several parameter groups: one series each, lr-<Optimizer>/pg<i>.
    std::map<std::string, double> stats;
    for (std::size_t g = 0; g < opt->numGroups(); ++g) {
      const std::string name =
          "lr-" + opt->name() + (opt->numGroups() > 1 ? "/pg" + std::to_string(g + 1) : std::string());
      stats[name] = opt->groupLr(g);
      if (log_momentum_) stats[name + "-momentum"] = opt->momentum().value_or(0.0);
      if (log_weight_decay_) stats[name + "-weight_decay"] = opt->weightDecay();
    }
    trainer.logMetrics(std::move(stats), trainer.globalStep());
  }
  std::string interval_;
  bool log_momentum_, log_weight_decay_;
};

HPU_REGISTER_COMPONENT(
    Callback,
    config::ComponentSchema{config::ComponentKind::kCallback,
                            "LearningRateMonitor",
                            "lightning.pytorch.callbacks",
                            {"LearningRateMonitor",
                             "",
                             {{"logging_interval", config::Type::optional(config::Type::string({"step", "epoch"})), "null",
                               "step: every log_every_n_steps steps; epoch: every epoch start; null: the scheduler's interval (both without one)."},
                              {"log_momentum", config::Type::boolean(), "false",
                               "Also log the momentum as lr-<Optimizer>-momentum (Adam's beta1; 0 without one)."},
                              {"log_weight_decay", config::Type::boolean(), "false",
                               "Also log the weight decay as lr-<Optimizer>-weight_decay."}}},
                            "Logs the learning rate (lr-<Optimizer>; lr-<Optimizer>/pg<i> per parameter group when there are several)."},
    [](const config::Params& p) { return std::make_unique<LearningRateMonitor>(p); });

}  // namespace
}  // namespace hpu::core
