// ThroughputMonitor: Lightning's callback that logs training throughput over
// a sliding window of the last window_size steps, every log_every_n_steps:
//   train/batches_per_sec, train/samples_per_sec (the whole job's),
//   train/device/batches_per_sec, train/device/samples_per_sec (one device's),
//   and, when the model reports its FLOPs per batch
//   (LightningModule::flopsPerBatch), train/flops_per_sec and
//   train/device/flops_per_sec, with train/device/mfu against the emulated
//   generation's peak for the run's precision;
// plus the running totals train/time, train/batches, train/samples.
// Samples are each batch's own size; time is, as in Lightning, the wall time
// since the first training batch started, less the time spent validating:
// what the loop takes per batch, data loading and optimizer included.
#include <chrono>
#include <deque>
#include <map>
#include <string>

#include "hpu/core/config/registry.h"
#include "hpu/core/trainer/trainer.h"
#include "hpu/device/device.h"
#include "hpu/device/spec.h"

namespace hpu::core {
namespace {

using Clock = std::chrono::steady_clock;

// The dtype the matrix engine computes in under a precision setting.
DType computeDtype(const std::string& precision) {
  if (precision == "fp8") return DType::kFloat8E4M3;
  if (precision.starts_with("bf16")) return DType::kBFloat16;
  if (precision.starts_with("16")) return DType::kFloat16;
  return DType::kFloat32;
}

class ThroughputMonitor final : public Callback {
 public:
  ThroughputMonitor(std::int64_t window, std::string separator)
      : window_(static_cast<std::size_t>(window)), separator_(std::move(separator)) {}
  std::string stateKey() const override { return "ThroughputMonitor"; }

  void onTrainBatchStart(Trainer& t, std::int64_t) override {
    if (!started_) start_ = Clock::now();
    started_ = true;
  }
  void onValidationStart(Trainer& t) override { validation_start_ = Clock::now(); }
  void onValidationEnd(Trainer& t) override {
    if (started_) start_ += Clock::now() - validation_start_;  // validation does not count
  }
  void onTrainBatchEnd(Trainer& t, std::int64_t) override {
    time_ = std::chrono::duration<double>(Clock::now() - start_).count();
    ++batches_;
    samples_ += t.trainBatchSize();
    window_points_.push_back({time_, batches_, samples_});
    if (window_points_.size() > window_) window_points_.pop_front();
    if (t.globalStep() == logged_step_ || t.globalStep() % t.options().log_every_n_steps != 0) return;
    logged_step_ = t.globalStep();
    std::map<std::string, double> m{{"train/time", time_},
                                    {"train/batches", static_cast<double>(batches_)},
                                    {"train/samples", static_cast<double>(samples_)}};
    if (window_points_.size() >= 2) {
      const Point& a = window_points_.front();
      const Point& b = window_points_.back();
      const double dt = b.time - a.time;
      if (dt > 0) {
        const double world = t.strategy().worldSize();
        const double batches = static_cast<double>(b.batches - a.batches) / dt;
        const double samples = static_cast<double>(b.samples - a.samples) / dt;
        m["train/device/batches_per_sec"] = batches;
        m["train/device/samples_per_sec"] = samples;
        m["train/batches_per_sec"] = batches * world;
        m["train/samples_per_sec"] = samples * world;
        if (const std::optional<double> flops = t.model().flopsPerBatch(t.trainBatchSize())) {
          const double per_device = *flops * batches;
          m["train/device/flops_per_sec"] = per_device;
          m["train/flops_per_sec"] = per_device * world;
          if (const auto peak = device::peakTflops(t.device().spec(), computeDtype(t.precision().precision())))
            m["train/device/mfu"] = per_device / (*peak * 1e12);
        }
      }
    }
    if (separator_ != "/") {
      std::map<std::string, double> renamed;
      for (auto& [name, value] : m) {
        std::string key;
        for (char c : name) key += c == '/' ? separator_ : std::string(1, c);
        renamed[key] = value;
      }
      m = std::move(renamed);
    }
    t.logMetrics(m, t.globalStep() - 1);
  }

 private:
  struct Point {
    double time;
    std::int64_t batches, samples;
  };
  std::size_t window_;
  std::string separator_;  // between the parts of a metric's name (train/device/mfu)
  bool started_ = false;
  Clock::time_point start_, validation_start_;
  double time_ = 0;
  std::int64_t batches_ = 0, samples_ = 0, logged_step_ = -1;
  std::deque<Point> window_points_;
};

HPU_REGISTER_COMPONENT(
    Callback,
    config::ComponentSchema{config::ComponentKind::kCallback,
                            "ThroughputMonitor",
                            "lightning.pytorch.callbacks",
                            {"ThroughputMonitor",
                             "",
                             {{"batch_size_fn", config::Type::optional(config::Type::string()), "null",
                               "How many samples a batch holds (Lightning requires a function; hpu-train counts "
                               "each batch's rows).",
                               "hpu-train counts each batch's samples itself (its rows); a Python function cannot run "
                               "here"},
                              {"length_fn", config::Type::optional(config::Type::string()), "null",
                               "Items (tokens) per batch, for items_per_sec.",
                               "hpu-train logs samples, batches and FLOPs per second, not items; a Python function "
                               "cannot run here"},
                              {"window_size", config::Type::integer().min(2), "100",
                               "Steps of the sliding window the rates are measured over."},
                              {"separator", config::Type::string(), "/",
                               "Between the parts of a metric's name (train/device/samples_per_sec)."}}},
                            "Logs samples/s, batches/s (and FLOP/s and MFU where the model reports its FLOPs)."},
    [](const config::Params& p) {
      return std::make_unique<ThroughputMonitor>(p.getInt("window_size"), p.getString("separator"));
    });

}  // namespace
}  // namespace hpu::core
