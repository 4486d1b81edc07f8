// Learning-rate schedulers with torch.optim.lr_scheduler's (and DeepSpeed's
// WarmupDecayLR's) exact semantics. A scheduler sets the learning rate of
// the optimizer it is attached to; the Trainer calls step() at the end of
// each epoch (interval kEpoch) or optimizer step (kStep).
// Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hpu/core/optim/optimizer.h"

namespace hpu::core::optim {

class LRScheduler {
 public:
  enum class Interval { kEpoch, kStep };
  virtual ~LRScheduler() = default;
  virtual std::string name() const = 0;
  virtual Interval interval() const { return Interval::kEpoch; }
  // The metric step() needs, "" for none (ReduceLROnPlateau: its monitor).
  virtual std::string monitor() const { return ""; }

  // Records the optimizer's lr as the base lr and sets the initial lr (as a
  // torch scheduler's constructor does).
  virtual void attach(Optimizer& optimizer);
  // Advances one interval. `metric` is the monitored value when monitor() is set.
  void step(std::optional<double> metric = std::nullopt);
  // Restarts at epoch 0 with lrAtStart() (torch's step(0), which
  // SequentialLR calls at a milestone).
  void restart();
  // torch's verbose: print every lr change to stdout, in torch's words.
  void setVerbose(bool verbose) { verbose_ = verbose; }
  std::int64_t lastEpoch() const { return last_epoch_; }

  // Checkpoint state: the counters (and, for ReduceLROnPlateau, its tracking).
  virtual std::vector<double> state() const { return {static_cast<double>(last_epoch_)}; }
  virtual void loadState(const std::vector<double>& s) { last_epoch_ = static_cast<std::int64_t>(s.at(0)); }

 protected:
  // The lr for `last_epoch_` given the current lr (chainable forms need it).
  virtual double computeLr(double current) = 0;
  // The lr at epoch 0 from the base lr alone (torch's closed form at 0,
  // with which SequentialLR restarts a scheduler at its milestone).
  virtual double lrAtStart() const { return baseLr(); }
  virtual void observe(std::optional<double>) {}
  // What verbose prints after a step changed the lr from `previous`:
  // torch's line, or "" for nothing (ReduceLROnPlateau speaks only when it
  // reduces).
  virtual std::string verboseLine(double previous) const;
  double baseLr() const { return base_lr_; }
  std::int64_t last_epoch_ = -1;
  Optimizer* optimizer_ = nullptr;

 private:
  double base_lr_ = 0.0;
  bool verbose_ = false;
};

std::unique_ptr<LRScheduler> makeStepLR(std::int64_t step_size, double gamma);
std::unique_ptr<LRScheduler> makeMultiStepLR(std::vector<std::int64_t> milestones, double gamma);
std::unique_ptr<LRScheduler> makeCosineAnnealingLR(std::int64_t t_max, double eta_min);

std::unique_ptr<LRScheduler> makeExponentialLR(double gamma);
// torch's LinearLR: the lr moves linearly from start_factor to end_factor
// times the base lr over total_iters epochs.
std::unique_ptr<LRScheduler> makeLinearLR(double start_factor, double end_factor, std::int64_t total_iters);

struct OneCycleOptions {
  double max_lr = 0.1;
  std::int64_t total_steps = 0;  // > 0
  double pct_start = 0.3;
  bool cos_anneal = true;  // anneal_strategy: cos (else linear)
  bool cycle_momentum = true;
  double base_momentum = 0.85;
  double max_momentum = 0.95;
  double div_factor = 25.0;
  double final_div_factor = 1e4;
  bool three_phase = false;
};
// torch's OneCycleLR: from max_lr / div_factor up to max_lr and down to
// initial / final_div_factor, cycling the momentum (SGD's, Adam's beta1)
// the other way. Throws UsageError when stepped past total_steps, or when
// cycle_momentum is set for an optimizer without momentum.
std::unique_ptr<LRScheduler> makeOneCycleLR(const OneCycleOptions& o);

// torch's SequentialLR: `schedulers` in turn, switching at each milestone
// (the next one restarts from its epoch-0 lr). REQUIRES: milestones has one
// entry fewer than schedulers, every scheduler steps per epoch and needs no
// metric.
std::unique_ptr<LRScheduler> makeSequentialLR(std::vector<std::unique_ptr<LRScheduler>> schedulers,
                                              std::vector<std::int64_t> milestones);

struct WarmupDecayOptions {
  double warmup_min_lr = 0.0;
  double warmup_max_lr = 0.001;
  std::int64_t warmup_num_steps = 1000;
  std::int64_t total_num_steps = 10000;
  bool log_warmup = true;  // DeepSpeed's warmup_type: "log" (default) or "linear"
};
// DeepSpeed's WarmupDecayLR: warm up from min to max lr, then decay linearly
// back to warmup_min_lr at total_num_steps. Steps every optimizer step; it sets its own lr
// (the optimizer's lr is ignored, as in DeepSpeed).
std::unique_ptr<LRScheduler> makeWarmupDecayLR(const WarmupDecayOptions& o);

// torch's SWALR (what StochasticWeightAveraging steps each epoch): anneals
// the lr it finds to swa_lr over anneal_epochs epochs, by a cosine
// (cos_anneal) or linearly, then holds swa_lr. REQUIRES: anneal_epochs >= 0.
std::unique_ptr<LRScheduler> makeSWALR(double swa_lr, std::int64_t anneal_epochs, bool cos_anneal);

struct PlateauOptions {
  std::string monitor;
  bool mode_max = false;
  double factor = 0.1;
  std::int64_t patience = 10;
  double threshold = 1e-4;
  bool threshold_rel = true;
  std::int64_t cooldown = 0;
  double min_lr = 0.0;
  double eps = 1e-8;
};
std::unique_ptr<LRScheduler> makeReduceLROnPlateau(const PlateauOptions& o);

}  // namespace hpu::core::optim
