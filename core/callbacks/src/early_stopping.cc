// EarlyStopping: stops fit when a monitored metric stops improving
// (Lightning's semantics: patience, min_delta, mode, check_finite,
// stopping/divergence thresholds). Checks after each validation run, or at
// the end of each training epoch when there is no validation.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "hpu/core/config/registry.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/trainer/trainer.h"

namespace hpu::core {
namespace {

using config::Type;
using nlohmann::json;

class EarlyStopping final : public Callback {
 public:
  explicit EarlyStopping(const config::Params& p)
      : monitor_(p.getString("monitor")),
        min_delta_(std::fabs(p.getFloat("min_delta"))),
        patience_(p.getInt("patience")),
        verbose_(p.getBool("verbose")),
        mode_max_(p.getString("mode") == "max"),
        strict_(p.getBool("strict")),
        check_finite_(p.getBool("check_finite")),
        log_rank_zero_only_(p.getBool("log_rank_zero_only")),
        stopping_threshold_(p.has("stopping_threshold") ? std::optional<double>(p.getFloat("stopping_threshold")) : std::nullopt),
        divergence_threshold_(p.has("divergence_threshold") ? std::optional<double>(p.getFloat("divergence_threshold"))
                                                            : std::nullopt),
        on_train_epoch_end_(p.has("check_on_train_epoch_end") ? std::optional<bool>(p.getBool("check_on_train_epoch_end"))
                                                              : std::nullopt),
        best_(mode_max_ ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity()) {}

  std::string stateKey() const override {
    return fmt::format("EarlyStopping{{'monitor': '{}', 'mode': '{}'}}", monitor_, mode_max_ ? "max" : "min");
  }
  std::string stateJson() const override {
    return json{{"wait_count", wait_}, {"stopped_epoch", stopped_epoch_}, {"best_score", best_}, {"patience", patience_}}.dump();
  }
  void loadStateJson(const std::string& text) override {
    const json j = json::parse(text);
    wait_ = j.value("wait_count", 0);
    stopped_epoch_ = j.value("stopped_epoch", 0);
    best_ = j.value("best_score", best_);
  }

  void onValidationEnd(Trainer& trainer) override {
    if (trainer.stage() == data::Stage::kFit && !trainer.sanityChecking() && !on_train_epoch_end_.value_or(false))
      check(trainer);
  }
  void onTrainEpochEnd(Trainer& trainer) override {
    // Without validation (or when asked), check on the training metrics.
    if (on_train_epoch_end_.value_or(trainer.numEvalBatches() == 0)) check(trainer);
  }

 private:
  bool improves(double v) const { return mode_max_ ? v - min_delta_ > best_ : v + min_delta_ < best_; }

  void check(Trainer& trainer) {
    auto it = trainer.callbackMetrics().find(monitor_);
    if (it == trainer.callbackMetrics().end()) {
      if (!strict_) return;
      std::string names;
      for (const auto& [k, v] : trainer.callbackMetrics()) names += (names.empty() ? "`" : "`, `") + k;
      throw UsageError(fmt::format("Early stopping conditioned on metric `{}` which is not available. Pass in or modify "
                                   "your `EarlyStopping` callback to use any of the following: {}",
                                   monitor_, names.empty() ? "(nothing was logged)" : names + "`"));
    }
    const double v = it->second;
    std::string reason;
    if (check_finite_ && !std::isfinite(v)) {
      reason = fmt::format("Monitored metric {} = {} is not finite. Previous best value was {:.3f}. Signaling Trainer to stop.",
                           monitor_, v, best_);
    } else if (stopping_threshold_ && (mode_max_ ? v > *stopping_threshold_ : v < *stopping_threshold_)) {
      reason = fmt::format("Stopping threshold reached: {} = {} {} {}. Signaling Trainer to stop.", monitor_, v,
                           mode_max_ ? ">" : "<", *stopping_threshold_);
    } else if (divergence_threshold_ && (mode_max_ ? v < *divergence_threshold_ : v > *divergence_threshold_)) {
      reason = fmt::format("Divergence threshold reached: {} = {} {} {}. Signaling Trainer to stop.", monitor_, v,
                           mode_max_ ? "<" : ">", *divergence_threshold_);
    } else if (improves(v)) {
      if (verbose_) logInfo(trainer, fmt::format("Metric {} improved to {:.3f}", monitor_, v));
      best_ = v;
      wait_ = 0;
    } else if (++wait_ >= patience_) {
      reason = fmt::format("Monitored metric {} did not improve in the last {} records. Best score: {:.3f}. Signaling "
                           "Trainer to stop.",
                           monitor_, wait_, best_);
    }
    if (reason.empty()) return;
    stopped_epoch_ = trainer.currentEpoch();
    if (verbose_)
      logInfo(trainer, reason);
    else if (trainer.isGlobalZero())
      spdlog::info("{}", reason);
    trainer.requestStop();
  }

  // verbose's messages, as Lightning logs them: from every rank (each line
  // carries its rank) unless log_rank_zero_only.
  void logInfo(Trainer& trainer, const std::string& message) const {
    if (!log_rank_zero_only_ || trainer.isGlobalZero()) spdlog::info("{}", message);
  }

  std::string monitor_;
  double min_delta_;
  std::int64_t patience_;
  bool verbose_, mode_max_, strict_, check_finite_, log_rank_zero_only_;
  std::optional<double> stopping_threshold_, divergence_threshold_;
  std::optional<bool> on_train_epoch_end_;
  double best_;
  std::int64_t wait_ = 0;
  std::int64_t stopped_epoch_ = 0;
};

HPU_REGISTER_COMPONENT(
    Callback,
    config::ComponentSchema{
        config::ComponentKind::kCallback,
        "EarlyStopping",
        "lightning.pytorch.callbacks",
        {"EarlyStopping",
         "",
         {{"monitor", Type::string(), "val_loss", "Logged metric to watch."},
          {"min_delta", Type::real(), "0.0", "Smallest change that counts as an improvement."},
          {"patience", Type::integer().min(1), "3", "Checks without improvement before stopping."},
          {"verbose", Type::boolean(), "false", "Log improvements."},
          {"mode", Type::string({"min", "max"}), "min", "Whether the metric should decrease or increase."},
          {"strict", Type::boolean(), "true", "Fail when the monitored metric was not logged."},
          {"check_finite", Type::boolean(), "true", "Stop when the metric becomes NaN or infinite."},
          {"stopping_threshold", Type::optional(Type::real()), "null", "Stop as soon as the metric passes this value."},
          {"divergence_threshold", Type::optional(Type::real()), "null", "Stop as soon as the metric is worse than this."},
          {"check_on_train_epoch_end", Type::optional(Type::boolean()), "null",
           "Check at the end of training epochs rather than after validation."},
          {"log_rank_zero_only", Type::boolean(), "false",
           "verbose: log from global rank 0 only (false: from every rank, each line with its rank)."}}},
        "Stops training when a monitored metric has stopped improving."},
    [](const config::Params& p) { return std::make_unique<EarlyStopping>(p); });

}  // namespace
}  // namespace hpu::core
