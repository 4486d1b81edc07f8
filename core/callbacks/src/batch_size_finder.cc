// BatchSizeFinder: Lightning's batch size scaling (tuner/batch_size_scaling.py)
// at the start of fit, against the emulated device's memory limit (the
// generation's HBM, or HPU_EMULATOR_MEMORY_LIMIT). From the state the fit
// starts in, each trial runs steps_per_trial training steps with the data
// module's batch size (its init_arg batch_arg_name); an out-of-memory error
// ends the trial as a failure. `power` doubles from init_val until a
// failure and keeps the last success; `binsearch` then bisects between the
// last success and the failure and takes `margin` off the result. The
// weights, optimizer and loop are restored from a checkpoint taken before,
// and the fit runs with the size found. Single-device only, as Lightning's.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <unistd.h>

#include "hpu/core/base/errors.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/trainer/trainer.h"
#include "hpu/device/byte_size.h"
#include "hpu/device/errors.h"

namespace hpu::core {
namespace {

using config::Type;

struct BatchSizeFinderOptions {
  bool binsearch = false;  // mode: binsearch (else power)
  std::int64_t steps_per_trial = 3;
  std::int64_t init_val = 2;
  std::int64_t max_trials = 25;
  std::string batch_arg_name = "batch_size";
  double margin = 0.05;  // binsearch only
  std::int64_t max_val = 8192;
};

// One search: the trials, and the batch size they change, in Lightning's words.
class BatchSizeSearch {
 public:
  BatchSizeSearch(Trainer& t, const BatchSizeFinderOptions& o)
      : t_(t), o_(o), size_(*t.dataModule().batchSizeArg(o.batch_arg_name)), lr_(t.optimizer()->lr()) {
    const auto train = t.dataModule().dataset(data::Split::kTrain);
    dataset_length_ = train ? train->size() : 0;
  }

  // A size is kept only once a trial ran it: max_val too is tried before
  // the search stops there.
  std::int64_t power() {
    std::int64_t new_size = adjust(std::min(o_.init_val, o_.max_val), "");
    bool any_success = false;
    for (std::int64_t i = 0; i < o_.max_trials; ++i) {
      if (trial()) {
        if (reachedMax()) break;
        if (i + 1 >= o_.max_trials) break;
        const std::int64_t before = size_;
        new_size = adjust(size_ * 2, "succeeded");
        if (new_size == before) break;
        any_success = true;
      } else {
        new_size = adjust(size_ / 2, "failed");
        if (any_success) break;
      }
    }
    return new_size;
  }

  std::int64_t binsearch() {
    std::int64_t new_size = adjust(std::min(o_.init_val, o_.max_val), "");
    std::int64_t low = 1, count = 0;
    std::optional<std::int64_t> high;
    while (true) {
      if (trial()) {
        if (reachedMax()) break;
        if (++count >= o_.max_trials) break;
        low = new_size;
        if (high && *high - low <= 1) break;
        const std::int64_t before = size_;
        new_size = adjust(high ? (*high + low) / 2 : size_ * 2, "succeeded");
        if (new_size == before) break;
      } else {
        high = new_size;
        new_size = adjust((*high + low) / 2, "failed");
        if (*high - low <= 1) break;
      }
    }
    if (o_.margin > 0) {
      const std::int64_t reduced = std::max<std::int64_t>(1, static_cast<std::int64_t>(new_size * (1 - o_.margin)));
      if (reduced != new_size) {
        info(fmt::format("Applying margin of {:.1f}%, reducing batch size from {} to {}", o_.margin * 100, new_size,
                         reduced));
        new_size = reduced;
      }
    }
    return new_size;
  }

  // After a successful trial: whether it ran max_val, where the search ends.
  bool reachedMax() const {
    if (size_ < o_.max_val) return false;
    info(fmt::format("Reached the maximum batch size limit of {}. Stopping search.", o_.max_val));
    return true;
  }

  // The data module's batch size from now on, with loaders that batch it.
  void set(std::int64_t size) {
    size_ = size;
    t_.reloadDataloaders();
  }

 private:
  void info(const std::string& message) const {
    if (t_.isGlobalZero()) spdlog::info("{}", message);
  }

  // Lightning's _adjust_batch_size: the batch size becomes `wanted` (capped
  // at max_val), unless it would grow past a size that already covers the
  // training set (Lightning refuses shrinking there too, which makes its
  // binsearch retry a failed size without end). Returns the batch size now set.
  std::int64_t adjust(std::int64_t wanted, std::string_view outcome) {
    if (wanted > size_ && dataset_length_ > 0 && size_ >= dataset_length_) {
      info(fmt::format("The batch size {} is greater or equal than the length of your dataset: {}.", size_,
                       dataset_length_));
      return size_;
    }
    if (wanted > o_.max_val) {
      if (!outcome.empty())
        info(fmt::format("Batch size {} exceeds max_val limit {}, capping at {}", wanted, o_.max_val, o_.max_val));
      wanted = o_.max_val;
    }
    if (!outcome.empty()) info(fmt::format("Batch size {} {}, trying batch size {}", size_, outcome, wanted));
    set(wanted);
    return wanted;
  }

  // steps_per_trial training steps, then as many validation batches, at the
  // current batch size; false if the device ran out of memory. A batch of one that does not fit ends the
  // search with the device's error.
  bool trial() {
    try {
      t_.runTrainingSteps(o_.steps_per_trial, [this](std::int64_t) { return lr_; },
                          [](std::int64_t, double) { return true; });
      // The fit's validation runs at this batch size too (Lightning's trials
      // set limit_val_batches = steps_per_trial).
      t_.runValidationSteps(o_.steps_per_trial);
      return true;
    } catch (const device::OutOfMemoryError& e) {
      if (size_ <= 1) {
        const device::OutOfMemoryInfo& i = e.info();
        throw device::DeviceError(fmt::format(
            "BatchSizeFinder: even a batch of 1 sample runs out of memory on {}: cannot allocate {} with {} of {} in "
            "use ({}); use trainer.precision=bf16-mixed, a sharding strategy (HPUDeepSpeedStrategy, stage 3) or a "
            "smaller model",
            i.device, device::formatByteSize(i.requested), device::formatByteSize(i.inUse),
            device::formatByteSize(i.limit), i.limitSource));
      }
      spdlog::debug("BatchSizeFinder: batch size {} ran out of memory: {}", size_, e.what());
      return false;
    }
  }

  Trainer& t_;
  const BatchSizeFinderOptions& o_;
  std::int64_t& size_;
  const double lr_;
  std::int64_t dataset_length_ = 0;
};

class BatchSizeFinder final : public Callback {
 public:
  explicit BatchSizeFinder(BatchSizeFinderOptions options) : o_(std::move(options)) {}
  std::string stateKey() const override { return "BatchSizeFinder"; }

  void setup(Trainer& t, data::Stage stage) override {
    if (stage != data::Stage::kFit) return;
    if (t.strategy().worldSize() > 1)
      throw UsageError(
          "The Batch size finder is not supported with distributed strategies. Find the batch size with devices: 1, "
          "then set it in the data module's init_args");
    if (!t.dataModule().batchSizeArg(o_.batch_arg_name))
      throw UsageError(fmt::format(
          "BatchSizeFinder: field {} not found in the data module {}: batch_arg_name names its init_arg that holds "
          "the batch size (batch_size in the built-in data modules but BoringDataModule, whose batch size is fixed)",
          o_.batch_arg_name, t.dataModule().name()));
  }

  void onFitStart(Trainer& t) override {
    if (t.options().fast_dev_run != 0) {
      if (t.isGlobalZero()) spdlog::warn("Skipping batch size scaler since `fast_dev_run` is enabled.");
      return;
    }
    const std::string name = fmt::format(".scale_batch_size_{}_{}.ckpt", ::getpid(),
                                         std::chrono::steady_clock::now().time_since_epoch().count());
    const std::string path = (std::filesystem::path(t.options().default_root_dir) / name).string();
    t.saveCheckpoint(path);
    BatchSizeSearch search(t, o_);
    std::int64_t found = 0;
    try {
      found = o_.binsearch ? search.binsearch() : search.power();
    } catch (...) {
      t.removeCheckpoint(path);
      throw;
    }
    t.restoreCheckpoint(path);
    t.removeCheckpoint(path);
    search.set(found);
    if (t.isGlobalZero())
      spdlog::info("Finished batch size finder, will continue with full run using batch size {}", found);
  }

 private:
  BatchSizeFinderOptions o_;
};

HPU_REGISTER_COMPONENT(
    Callback,
    config::ComponentSchema{
        config::ComponentKind::kCallback,
        "BatchSizeFinder",
        "lightning.pytorch.callbacks",
        {"BatchSizeFinder",
         "",
         {{"mode", Type::string({"power", "binsearch"}), "power",
           "power: double until out of memory; binsearch: then bisect between the last success and the failure."},
          {"steps_per_trial", Type::integer().min(1), "3", "Training steps run at each batch size."},
          {"init_val", Type::integer().min(1), "2", "The batch size of the first trial."},
          {"max_trials", Type::integer().min(1), "25", "Trials before the search stops."},
          {"batch_arg_name", Type::string(), "batch_size", "The data module's init_arg that holds the batch size."},
          {"margin", Type::real().min(0.0).max(1.0, true), "0.05",
           "binsearch: the fraction taken off the size found, as a safety buffer.", "", true},
          {"max_val", Type::integer().min(1), "8192", "The largest batch size tried.", "", true}}},
        "Before fit, finds the largest batch size that fits in the device memory and fits with it."},
    [](const config::Params& p) {
      BatchSizeFinderOptions o;
      o.binsearch = p.getString("mode") == "binsearch";
      o.steps_per_trial = p.getInt("steps_per_trial");
      o.init_val = p.getInt("init_val");
      o.max_trials = p.getInt("max_trials");
      o.batch_arg_name = p.getString("batch_arg_name");
      o.margin = p.getFloat("margin");
      o.max_val = p.getInt("max_val");
      return std::make_unique<BatchSizeFinder>(std::move(o));
    });

}  // namespace
}  // namespace hpu::core
