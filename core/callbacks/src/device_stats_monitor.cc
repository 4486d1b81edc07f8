// DeviceStatsMonitor: logs the device's ten memory statistics (the seeds'
// DeviceStatsMonitor metrics) at the start and end of train, validation and
// test batches, every log_every_n_steps batches, under Lightning's keys:
// "DeviceStatsMonitor.on_train_batch_start/InUse". cpu_stats adds the host
// process's resident memory and CPU use.
#include <spdlog/fmt/fmt.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include "hpu/core/config/registry.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/trainer/trainer.h"

namespace hpu::core {
namespace {

class DeviceStatsMonitor final : public Callback {
 public:
  explicit DeviceStatsMonitor(bool cpu_stats) : cpu_stats_(cpu_stats) {}
  std::string stateKey() const override { return "DeviceStatsMonitor"; }

  void setup(Trainer& trainer, data::Stage) override {
    if (trainer.loggers().empty())
      throw UsageError("Cannot use `DeviceStatsMonitor` callback with `Trainer(logger=False)`.");
  }
  // A training batch counts by the global step before it (as Lightning's
  // loggers do); an evaluation batch by its index.
  void onTrainBatchStart(Trainer& t, std::int64_t) override {
    step_ = t.globalStep();
    record(t, step_, step_, "on_train_batch_start");
  }
  void onTrainBatchEnd(Trainer& t, std::int64_t) override { record(t, step_, step_, "on_train_batch_end"); }
  void onValidationBatchStart(Trainer& t, std::int64_t i) override {
    record(t, i, evalStep(t, i), "on_validation_batch_start");
  }
  void onValidationBatchEnd(Trainer& t, std::int64_t i) override { record(t, i, evalStep(t, i), "on_validation_batch_end"); }
  void onTestBatchStart(Trainer& t, std::int64_t i) override { record(t, i, evalStep(t, i), "on_test_batch_start"); }
  void onTestBatchEnd(Trainer& t, std::int64_t i) override { record(t, i, evalStep(t, i), "on_test_batch_end"); }

 private:
  // Validation inside fit logs at the step of the metrics it follows.
  static std::int64_t evalStep(const Trainer& t, std::int64_t batch_idx) {
    return t.stage() == data::Stage::kFit ? t.globalStep() - 1 : batch_idx;
  }

  // Logs the stats at `step` every log_every_n_steps-th `count` (from 0).
  void record(Trainer& t, std::int64_t count, std::int64_t step, const char* hook) {
    if (t.sanityChecking() || (count + 1) % t.options().log_every_n_steps != 0) return;
    std::map<std::string, double> m;
    const std::string prefix = std::string("DeviceStatsMonitor.") + hook + "/";
    for (const auto& metric : t.device().allocator().stats().metrics())
      m[prefix + std::string(metric.name)] = static_cast<double>(metric.value);
    if (cpu_stats_) {
      m[prefix + "cpu_rss_bytes"] = static_cast<double>(residentBytes());
      m[prefix + "cpu_percent"] = cpuPercent();
    }
    t.logMetrics(std::move(m), step);
  }

  static std::uint64_t residentBytes() {
    std::ifstream f("/proc/self/statm");
    std::uint64_t size = 0, resident = 0;
    f >> size >> resident;
    return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  }

  // Process CPU time over wall time since the previous sample, in percent.
  double cpuPercent() {
    std::ifstream f("/proc/self/stat");
    std::string field;
    double ticks = 0;
    for (int i = 1; i <= 15 && f >> field; ++i)
      if (i == 14 || i == 15) ticks += std::stod(field);
    const double cpu = ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    const double pct = last_wall_ > 0 && wall > last_wall_ ? 100.0 * (cpu - last_cpu_) / (wall - last_wall_) : 0.0;
    last_cpu_ = cpu;
    last_wall_ = wall;
    return pct;
  }

  bool cpu_stats_;
  std::int64_t step_ = 0;  // the global step before the current training batch
  double last_cpu_ = 0, last_wall_ = 0;
};

HPU_REGISTER_COMPONENT(
    Callback,
    config::ComponentSchema{config::ComponentKind::kCallback,
                            "DeviceStatsMonitor",
                            "lightning.pytorch.callbacks",
                            {"DeviceStatsMonitor",
                             "",
                             {{"cpu_stats", config::Type::optional(config::Type::boolean()), "null",
                               "Also log the host process's resident memory and CPU use."}}},
                            "Logs the HPU memory statistics (Limit, InUse, MaxInUse, ...) during batches."},
    [](const config::Params& p) { return std::make_unique<DeviceStatsMonitor>(p.has("cpu_stats") && p.getBool("cpu_stats")); });

}  // namespace
}  // namespace hpu::core
