#include "hpu/core/optim/lr_scheduler.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <limits>
#include <numbers>

#include "hpu/core/base/errors.h"

namespace hpu::core::optim {

void LRScheduler::attach(Optimizer& optimizer) {
  optimizer_ = &optimizer;
  base_lr_ = optimizer.initialLr();
  last_epoch_ = -1;
  step();  // torch schedulers step once on construction: lr for epoch 0
}

void LRScheduler::step(std::optional<double> metric) {
  observe(metric);
  ++last_epoch_;
  const double previous = optimizer_->lr();
  optimizer_->setLr(computeLr(previous));
  if (verbose_)
    if (const std::string line = verboseLine(previous); !line.empty()) {
      std::fputs(line.c_str(), stdout);
      std::fflush(stdout);
    }
}

void LRScheduler::restart() {
  last_epoch_ = 0;
  optimizer_->setLr(lrAtStart());
}

std::string LRScheduler::verboseLine(double) const {
  return fmt::format("Adjusting learning rate of group 0 to {:.4e}.\n", optimizer_->lr());
}

namespace {

class StepLR final : public LRScheduler {
 public:
  StepLR(std::int64_t step_size, double gamma) : step_size_(step_size), gamma_(gamma) {}
  std::string name() const override { return "StepLR"; }

 protected:
  double computeLr(double current) override {
    if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return current;
    return current * gamma_;
  }

 private:
  std::int64_t step_size_;
  double gamma_;
};

class MultiStepLR final : public LRScheduler {
 public:
  MultiStepLR(std::vector<std::int64_t> milestones, double gamma) : milestones_(std::move(milestones)), gamma_(gamma) {}
  std::string name() const override { return "MultiStepLR"; }

 protected:
  double computeLr(double current) override {
    const auto hits = std::count(milestones_.begin(), milestones_.end(), last_epoch_);
    return hits == 0 ? current : current * std::pow(gamma_, static_cast<double>(hits));
  }

 private:
  std::vector<std::int64_t> milestones_;
  double gamma_;
};

// torch's recursive (chainable) form, which it uses when stepped every epoch.
class CosineAnnealingLR final : public LRScheduler {
 public:
  CosineAnnealingLR(std::int64_t t_max, double eta_min) : t_max_(t_max), eta_min_(eta_min) {}
  std::string name() const override { return "CosineAnnealingLR"; }

 protected:
  double computeLr(double current) override {
    const double pi = std::numbers::pi;
    const auto e = static_cast<double>(last_epoch_);
    const auto t = static_cast<double>(t_max_);
    if (last_epoch_ == 0) return baseLr();
    if ((last_epoch_ - 1 - t_max_) % (2 * t_max_) == 0)
      return current + (baseLr() - eta_min_) * (1 - std::cos(pi / t)) / 2;
    return (1 + std::cos(pi * e / t)) / (1 + std::cos(pi * (e - 1) / t)) * (current - eta_min_) + eta_min_;
  }

 private:
  std::int64_t t_max_;
  double eta_min_;
};

class ExponentialLR final : public LRScheduler {
 public:
  explicit ExponentialLR(double gamma) : gamma_(gamma) {}
  std::string name() const override { return "ExponentialLR"; }

 protected:
  double computeLr(double current) override { return last_epoch_ == 0 ? current : current * gamma_; }

 private:
  double gamma_;
};

// torch's chainable form: each step scales the current lr by the ratio of
// consecutive factors.
class LinearLR final : public LRScheduler {
 public:
  LinearLR(double start, double end, std::int64_t total) : start_(start), end_(end), total_(total) {}
  std::string name() const override { return "LinearLR"; }

 protected:
  double computeLr(double current) override {
    if (last_epoch_ == 0) return current * start_;
    if (last_epoch_ > total_) return current;
    return current * (1.0 + (end_ - start_) / (static_cast<double>(total_) * start_ +
                                               static_cast<double>(last_epoch_ - 1) * (end_ - start_)));
  }
  double lrAtStart() const override { return baseLr() * start_; }

 private:
  double start_, end_;
  std::int64_t total_;
};

class OneCycleLR final : public LRScheduler {
 public:
  explicit OneCycleLR(const OneCycleOptions& o) : o_(o) {
    const double initial = o.max_lr / o.div_factor, total = static_cast<double>(o.total_steps);
    const double min_lr = initial / o.final_div_factor;
    if (o.three_phase)
      phases_ = {{o.pct_start * total - 1, initial, o.max_lr, o.max_momentum, o.base_momentum},
                 {2 * o.pct_start * total - 2, o.max_lr, initial, o.base_momentum, o.max_momentum},
                 {total - 1, initial, min_lr, o.max_momentum, o.max_momentum}};
    else
      phases_ = {{o.pct_start * total - 1, initial, o.max_lr, o.max_momentum, o.base_momentum},
                 {total - 1, o.max_lr, min_lr, o.base_momentum, o.max_momentum}};
  }
  std::string name() const override { return "OneCycleLR"; }
  void attach(Optimizer& optimizer) override {
    if (o_.cycle_momentum && !optimizer.momentum())
      throw UsageError(optimizer.name() + " has no momentum for OneCycleLR's cycle_momentum; set cycle_momentum: false");
    LRScheduler::attach(optimizer);
  }

 protected:
  double computeLr(double) override {
    if (last_epoch_ > o_.total_steps)
      throw UsageError(fmt::format("Tried to step {} times. The specified number of total steps is {}", last_epoch_,
                                   o_.total_steps));
    const auto step = static_cast<double>(last_epoch_);
    double start_step = 0;
    for (std::size_t i = 0; i < phases_.size(); ++i) {
      const Phase& ph = phases_[i];
      if (step <= ph.end_step || i + 1 == phases_.size()) {
        const double pct = (step - start_step) / (ph.end_step - start_step);
        if (o_.cycle_momentum) optimizer_->setMomentum(anneal(ph.start_momentum, ph.end_momentum, pct));
        return anneal(ph.start_lr, ph.end_lr, pct);
      }
      start_step = ph.end_step;
    }
    return phases_.back().end_lr;
  }
  double lrAtStart() const override { return phases_.front().start_lr; }

 private:
  struct Phase {
    double end_step, start_lr, end_lr, start_momentum, end_momentum;
  };
  double anneal(double start, double end, double pct) const {
    if (o_.cos_anneal) return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1);
    return (end - start) * pct + start;
  }
  OneCycleOptions o_;
  std::vector<Phase> phases_;
};

class SequentialLR final : public LRScheduler {
 public:
  SequentialLR(std::vector<std::unique_ptr<LRScheduler>> schedulers, std::vector<std::int64_t> milestones)
      : schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {}
  std::string name() const override { return "SequentialLR"; }
  // As torch: every scheduler is built on the optimizer, the lr is reset to
  // its initial value and only the first scheduler takes its initial step.
  void attach(Optimizer& optimizer) override {
    optimizer_ = &optimizer;
    for (auto& s : schedulers_) s->attach(optimizer);
    optimizer.setLr(optimizer.initialLr());
    schedulers_.front()->attach(optimizer);
    last_epoch_ = 0;
  }
  std::vector<double> state() const override {
    std::vector<double> out{static_cast<double>(last_epoch_)};
    for (const auto& s : schedulers_) {
      const auto child = s->state();
      out.push_back(static_cast<double>(child.size()));
      out.insert(out.end(), child.begin(), child.end());
    }
    return out;
  }
  void loadState(const std::vector<double>& s) override {
    last_epoch_ = static_cast<std::int64_t>(s.at(0));
    std::size_t at = 1;
    for (auto& child : schedulers_) {
      const auto n = static_cast<std::size_t>(s.at(at));
      child->loadState(std::vector<double>(s.begin() + static_cast<std::ptrdiff_t>(at + 1),
                                           s.begin() + static_cast<std::ptrdiff_t>(at + 1 + n)));
      at += 1 + n;
    }
  }

 protected:
  double computeLr(double) override {
    const auto idx = static_cast<std::size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) -
                                              milestones_.begin());
    if (idx > 0 && milestones_[idx - 1] == last_epoch_)
      schedulers_[idx]->restart();
    else
      schedulers_[idx]->step();
    return optimizer_->lr();
  }

 private:
  std::vector<std::unique_ptr<LRScheduler>> schedulers_;
  std::vector<std::int64_t> milestones_;
};

class WarmupDecayLR final : public LRScheduler {
 public:
  explicit WarmupDecayLR(const WarmupDecayOptions& o) : o_(o) {}
  std::string name() const override { return "WarmupDecayLR"; }
  Interval interval() const override { return Interval::kStep; }

 protected:
  double computeLr(double) override {
    const auto it = static_cast<double>(last_epoch_);
    const std::int64_t warmup = std::max<std::int64_t>(2, o_.warmup_num_steps);  // as DeepSpeed clamps it
    double gamma;
    if (last_epoch_ < warmup)
      gamma = o_.log_warmup ? (1.0 / std::log(static_cast<double>(warmup))) * std::log(it + 1)
                            : it / static_cast<double>(warmup);
    else
      gamma = std::max(0.0, static_cast<double>(o_.total_num_steps - last_epoch_) /
                                std::max(1.0, static_cast<double>(o_.total_num_steps - warmup)));
    return o_.warmup_min_lr + (o_.warmup_max_lr - o_.warmup_min_lr) * gamma;
  }

 private:
  WarmupDecayOptions o_;
};

// torch.optim.swa_utils.SWALR, in its chainable form: from the lr it finds,
// the lr moves to swa_lr over anneal_epochs steps along the anneal curve
// (alpha from 0 to 1), then stays there. Each step recovers the lr the
// annealing started from out of the current lr and the previous alpha.
class SWALR final : public LRScheduler {
 public:
  SWALR(double swa_lr, std::int64_t anneal_epochs, bool cos) : swa_lr_(swa_lr), anneal_(anneal_epochs), cos_(cos) {}
  std::string name() const override { return "SWALR"; }

 protected:
  double computeLr(double current) override {
    const std::int64_t step = anneal_ == 0 ? std::max<std::int64_t>(1, last_epoch_) : last_epoch_;
    const auto span = static_cast<double>(std::max<std::int64_t>(1, anneal_));
    const double prev_alpha = alpha(static_cast<double>(step - 1) / span);
    const double start = prev_alpha == 1.0 ? swa_lr_ : (current - prev_alpha * swa_lr_) / (1 - prev_alpha);
    const double a = alpha(static_cast<double>(step) / span);
    return swa_lr_ * a + start * (1 - a);
  }

 private:
  double alpha(double t) const {
    t = std::clamp(t, 0.0, 1.0);
    return cos_ ? (1 - std::cos(std::numbers::pi * t)) / 2 : t;
  }
  double swa_lr_;
  std::int64_t anneal_;
  bool cos_;
};

class ReduceLROnPlateau final : public LRScheduler {
 public:
  explicit ReduceLROnPlateau(const PlateauOptions& o)
      : o_(o), best_(o.mode_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity()) {}
  std::string name() const override { return "ReduceLROnPlateau"; }
  std::string monitor() const override { return o_.monitor; }
  std::vector<double> state() const override {
    return {static_cast<double>(last_epoch_), best_, static_cast<double>(bad_epochs_),
            static_cast<double>(cooldown_counter_)};
  }
  void loadState(const std::vector<double>& s) override {
    last_epoch_ = static_cast<std::int64_t>(s.at(0));
    best_ = s.at(1);
    bad_epochs_ = static_cast<std::int64_t>(s.at(2));
    cooldown_counter_ = static_cast<std::int64_t>(s.at(3));
  }

 protected:
  void observe(std::optional<double> metric) override { pending_ = metric; }
  std::string verboseLine(double previous) const override {
    if (optimizer_->lr() == previous) return "";
    return fmt::format("Epoch {:05d}: reducing learning rate of group 0 to {:.4e}.\n", last_epoch_, optimizer_->lr());
  }
  double computeLr(double current) override {
    if (!pending_) return current;  // the constructor's step and steps without a metric
    const double m = *pending_;
    pending_.reset();
    if (better(m)) {
      best_ = m;
      bad_epochs_ = 0;
    } else {
      ++bad_epochs_;
    }
    if (cooldown_counter_ > 0) {
      --cooldown_counter_;
      bad_epochs_ = 0;
    }
    if (bad_epochs_ > o_.patience) {
      const double next = std::max(current * o_.factor, o_.min_lr);
      cooldown_counter_ = o_.cooldown;
      bad_epochs_ = 0;
      if (current - next > o_.eps) return next;
    }
    return current;
  }

 private:
  bool better(double a) const {
    if (o_.threshold_rel)
      return o_.mode_max ? a > best_ * (1 + o_.threshold) : a < best_ * (1 - o_.threshold);
    return o_.mode_max ? a > best_ + o_.threshold : a < best_ - o_.threshold;
  }
  PlateauOptions o_;
  double best_;
  std::int64_t bad_epochs_ = 0;
  std::int64_t cooldown_counter_ = 0;
  std::optional<double> pending_;
};

}  // namespace

std::unique_ptr<LRScheduler> makeStepLR(std::int64_t step_size, double gamma) {
  return std::make_unique<StepLR>(step_size, gamma);
}
std::unique_ptr<LRScheduler> makeMultiStepLR(std::vector<std::int64_t> milestones, double gamma) {
  return std::make_unique<MultiStepLR>(std::move(milestones), gamma);
}
std::unique_ptr<LRScheduler> makeCosineAnnealingLR(std::int64_t t_max, double eta_min) {
  return std::make_unique<CosineAnnealingLR>(t_max, eta_min);
}
std::unique_ptr<LRScheduler> makeExponentialLR(double gamma) { return std::make_unique<ExponentialLR>(gamma); }
std::unique_ptr<LRScheduler> makeLinearLR(double start_factor, double end_factor, std::int64_t total_iters) {
  return std::make_unique<LinearLR>(start_factor, end_factor, total_iters);
}
std::unique_ptr<LRScheduler> makeOneCycleLR(const OneCycleOptions& o) { return std::make_unique<OneCycleLR>(o); }
std::unique_ptr<LRScheduler> makeSequentialLR(std::vector<std::unique_ptr<LRScheduler>> schedulers,
                                              std::vector<std::int64_t> milestones) {
  return std::make_unique<SequentialLR>(std::move(schedulers), std::move(milestones));
}
std::unique_ptr<LRScheduler> makeWarmupDecayLR(const WarmupDecayOptions& o) {
  return std::make_unique<WarmupDecayLR>(o);
}
std::unique_ptr<LRScheduler> makeSWALR(double swa_lr, std::int64_t anneal_epochs, bool cos_anneal) {
  return std::make_unique<SWALR>(swa_lr, anneal_epochs, cos_anneal);
}
std::unique_ptr<LRScheduler> makeReduceLROnPlateau(const PlateauOptions& o) {
  return std::make_unique<ReduceLROnPlateau>(o);
}

}  // namespace hpu::core::optim
