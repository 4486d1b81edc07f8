// Timer: Lightning's Timer callback. Measures the time of each stage (train:
// the fit loop with its validation; validate; test; predict) and, with a
// duration ("DD:HH:MM:SS" or {days, hours, minutes, seconds, ...}), asks the
// Trainer to stop once training has run that long, checked after every
// training step (interval: step) or epoch (interval: epoch). Stopping goes
// through Trainer::requestStop, so the epoch ends cleanly (validation,
// checkpoints) as with early stopping. The times are checkpointed: a
// resumed run counts the time already spent.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "hpu/core/config/registry.h"
#include "hpu/core/trainer/trainer.h"

namespace hpu::core {
namespace {

using Clock = std::chrono::steady_clock;
using config::Type;

class Timer final : public Callback {
 public:
  Timer(std::optional<std::chrono::milliseconds> duration, std::string interval, bool verbose)
      : duration_(duration), interval_(std::move(interval)), verbose_(verbose) {}
  std::string stateKey() const override { return "Timer"; }

  void onFitStart(Trainer&) override { start("train"); }
  void onFitEnd(Trainer&) override { end("train"); }
  void onValidationStart(Trainer& t) override {
    if (t.stage() == data::Stage::kValidate) start("validate");
  }
  void onValidationEnd(Trainer& t) override {
    if (t.stage() == data::Stage::kValidate) end("validate");
  }
  void onTestStart(Trainer&) override { start("test"); }
  void onTestEnd(Trainer&) override { end("test"); }
  void onPredictStart(Trainer&) override { start("predict"); }
  void onPredictEnd(Trainer&) override { end("predict"); }

  void onTrainBatchEnd(Trainer& t, std::int64_t) override {
    if (interval_ == "step") check(t);
  }
  void onTrainEpochEnd(Trainer& t) override {
    if (interval_ == "epoch") check(t);
  }

  // Seconds spent in `stage` so far (with the time restored from a checkpoint).
  double elapsed(const std::string& stage) const {
    double s = offset_.count(stage) ? offset_.at(stage) : 0.0;
    if (auto it = start_.find(stage); it != start_.end())
      s += std::chrono::duration<double>((end_.count(stage) ? end_.at(stage) : Clock::now()) - it->second).count();
    return s;
  }

  std::string stateJson() const override {
    nlohmann::json times = nlohmann::json::object();
    for (const char* stage : {"train", "validate", "test", "predict"}) times[stage] = elapsed(stage);
    return nlohmann::json{{"time_elapsed", times}}.dump();
  }
  void loadStateJson(const std::string& text) override {
    const nlohmann::json j = nlohmann::json::parse(text);
    for (const auto& [stage, seconds] : j.at("time_elapsed").items()) offset_[stage] = seconds.get<double>();
  }

 private:
  void start(const std::string& stage) {
    start_[stage] = Clock::now();
    end_.erase(stage);
  }
  void end(const std::string& stage) { end_[stage] = Clock::now(); }

  void check(Trainer& t) {
    if (!duration_ || t.shouldStop()) return;
    const double train = elapsed("train");
    // Every rank stops on rank 0's clock, so that they stop at the same step.
    const bool up = t.strategy().broadcast(std::string(train >= std::chrono::duration<double>(*duration_).count() ? "1" : "0"), 0) == "1";
    if (!up) return;
    t.requestStop();
    if (verbose_ && t.isGlobalZero()) {
      const auto s = static_cast<long long>(train);
      spdlog::info("Time limit reached. Elapsed time is {}:{:02}:{:02}. Signaling Trainer to stop.", s / 3600, s / 60 % 60,
                   s % 60);
    }
  }

  std::optional<std::chrono::milliseconds> duration_;
  std::string interval_;
  bool verbose_;
  std::map<std::string, Clock::time_point> start_, end_;
  std::map<std::string, double> offset_;
};

HPU_REGISTER_COMPONENT(
    Callback,
    config::ComponentSchema{
        config::ComponentKind::kCallback,
        "Timer",
        "lightning.pytorch.callbacks",
        {"Timer",
         "",
         {{"duration", Type::optional(Type::anyOf({Type::string(), Type::dict()})), "null",
           "Stop training after this long: \"DD:HH:MM:SS\" or {days, hours, minutes, seconds} (null: only measure)."},
          {"interval", Type::string({"step", "epoch"}), "step", "Check the time after every step or epoch."},
          {"verbose", Type::boolean(), "true", "Say when the time limit stops training."}}},
        "Times each stage and stops training after a duration; the times are checkpointed."},
    [](const config::Params& p) {
      std::optional<std::chrono::milliseconds> duration;
      if (p.has("duration")) duration = parseDuration(p.node("duration"), p.pathOf("duration"));
      return std::make_unique<Timer>(duration, p.getString("interval"), p.getBool("verbose"));
    });

}  // namespace
}  // namespace hpu::core
