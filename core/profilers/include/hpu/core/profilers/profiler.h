// Profilers time named actions of a run (Lightning's Profiler API). The
// Trainer brackets its own actions (run_training_epoch, run_training_batch,
// training_step, backward, optimizer_step, validation_step, ...); model code
// adds custom ones through LightningModule::profiler(): a profile("name")
// scope or start()/stop().
//
// Lifecycle: setup() once before the stage runs, start()/stop() pairs during
// it (properly nested: an action stops before the one that encloses it),
// teardown() once at its end, which reports (prints or writes files).
// A profiler may also watch the device's ops and the process group's
// collectives; the Trainer installs opObserver() on the training thread and
// hands collectiveObserver() to the strategy.
//
// Not thread-safe apart from collectiveObserver() (called from the comm
// thread): one training thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hpu/comm/collective_observer.h"

namespace hpu::device {
class Device;
}

namespace hpu::core {

namespace ops {
class OpObserver;
}

// Where the run reports from and to.
struct ProfilerContext {
  std::string stage;     // "fit", "validate", "test", "predict"
  int rank = 0;          // global rank of this process
  int world_size = 1;
  std::string log_dir;   // the logger's directory: the default dirpath
  device::Device* device = nullptr;  // this process's device (lazy-mode statistics)
};

class Profiler {
 public:
  virtual ~Profiler() = default;
  virtual void setup(const ProfilerContext& context) {}
  virtual void start(std::string_view action) = 0;
  virtual void stop(std::string_view action) = 0;
  virtual void teardown() {}

  // Null when the profiler does not trace ops / collectives.
  virtual ops::OpObserver* opObserver() { return nullptr; }
  virtual std::shared_ptr<comm::CollectiveObserver> collectiveObserver() { return nullptr; }

  // Stops `action` when it goes out of scope.
  class Scope {
   public:
    Scope(Profiler& p, std::string_view action) : p_(&p), action_(action) { p_->start(action_); }
    ~Scope() {
      if (p_) p_->stop(action_);
    }
    Scope(Scope&& o) noexcept : p_(o.p_), action_(std::move(o.action_)) { o.p_ = nullptr; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Profiler* p_;
    std::string action_;
  };
  [[nodiscard]] Scope profile(std::string_view action) { return Scope(*this, action); }
};

// Records nothing (trainer.profiler: null).
class PassThroughProfiler final : public Profiler {
 public:
  void start(std::string_view) override {}
  void stop(std::string_view) override {}
};

// The file a profiler writes for this rank:
// "<dirpath>/<filename>-rank<R>-<stage><extension>" ("<dirpath>/rank<R>-..."
// without a filename). Creates dirpath.
std::string profilerReportPath(const std::string& dirpath, const std::string& filename, const ProfilerContext& context,
                               std::string_view extension);

// Lightning's report of a stage: "<STAGE> Profiler Report", then for each
// section "Profile stats for: <name>" and its text.
std::string profilerReport(const ProfilerContext& context,
                           const std::vector<std::pair<std::string, std::string>>& sections);
// Where a profiler's text report goes: with a filename, every rank writes
// profilerReportPath(..., ".txt"); without, global rank 0 prints it.
void emitProfilerReport(const std::string& dirpath, const std::string& filename, const ProfilerContext& context,
                        const std::string& report);

}  // namespace hpu::core
