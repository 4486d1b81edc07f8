#include "metric_collector.h"

#include <vector>

namespace hpu::core {

void MetricCollector::log(const std::string& name, double value, const LogOptions& options) {
  const bool training = hook_ == Hook::kTraining;
  const bool on_step = options.on_step.value_or(training);
  const bool on_epoch = options.on_epoch.value_or(!training);
  const bool both = on_step && on_epoch;
  if (on_step) {
    const std::string key = both ? name + "_step" : name;
    step_[key] = value;
    if (options.prog_bar) progress_.insert(key);
  }
  if (on_epoch) {
    const std::string key = both ? name + "_epoch" : name;
    Mean& m = epoch_[key];
    m.weighted_sum += value * static_cast<double>(batch_size_);
    m.weight += static_cast<double>(batch_size_);
    if (options.prog_bar) progress_.insert(key);
  }
}

std::map<std::string, double> MetricCollector::takeStepMetrics() {
  std::map<std::string, double> out;
  out.swap(step_);
  return out;
}

std::map<std::string, double> MetricCollector::takeEpochMetrics(Strategy& strategy) {
  // Every rank logs the same names (same model code), so a flat array of
  // (sum, weight) pairs in name order reduces them all at once.
  std::vector<double> flat;
  for (const auto& [name, m] : epoch_) {
    flat.push_back(m.weighted_sum);
    flat.push_back(m.weight);
  }
  strategy.allReduceSum(flat);
  std::map<std::string, double> out;
  std::size_t i = 0;
  for (const auto& [name, m] : epoch_) {
    out[name] = flat[i + 1] > 0 ? flat[i] / flat[i + 1] : 0.0;
    i += 2;
  }
  epoch_.clear();
  return out;
}

}  // namespace hpu::core
