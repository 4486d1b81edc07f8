// Collects what model code logs (LightningModule::log) with Lightning's
// semantics: per-step values, and per-epoch means weighted by batch size
// that are reduced across ranks when the epoch ends.
#pragma once

#include <map>
#include <set>
#include <string>

#include "hpu/core/module/lightning_module.h"
#include "hpu/core/strategies/strategy.h"

namespace hpu::core {

class MetricCollector final : public MetricSink {
 public:
  enum class Hook { kNone, kTraining, kEvaluation };

  // The hook now running and the size of its batch (the weight of epoch means).
  void setHook(Hook hook, std::int64_t batch_size) {
    hook_ = hook;
    batch_size_ = batch_size;
  }
  void log(const std::string& name, double value, const LogOptions& options) override;

  // Values logged per step since the last call (name, or name_step when also
  // logged per epoch).
  std::map<std::string, double> takeStepMetrics();
  // Epoch means (name, or name_epoch when also logged per step), averaged
  // across ranks weighted by their samples; clears the accumulation.
  std::map<std::string, double> takeEpochMetrics(Strategy& strategy);
  // Drops what was logged and not yet taken (a failed tuning step's run).
  void clear() {
    step_.clear();
    epoch_.clear();
  }
  // Names to show in the progress bar.
  bool inProgressBar(const std::string& name) const { return progress_.count(name) != 0; }

 private:
  struct Mean {
    double weighted_sum = 0;
    double weight = 0;
  };
  Hook hook_ = Hook::kNone;
  std::int64_t batch_size_ = 1;
  std::map<std::string, double> step_;
  std::map<std::string, Mean> epoch_;
  std::set<std::string> progress_;
};

}  // namespace hpu::core
