// Profilers time named actions of a run (Lightning's Profiler API). The
// Trainer brackets its own actions (run_training_batch, training_step,
// backward, optimizer_step, ...); model code adds custom ones through
// LightningModule::profiler(): a profile("name") scope or start()/stop().
// Not thread-safe: one training thread.
#pragma once

#include <string>
#include <string_view>

namespace hpu::core {

class Profiler {
 public:
  virtual ~Profiler() = default;
  virtual void start(std::string_view action) = 0;
  virtual void stop(std::string_view action) = 0;

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

}  // namespace hpu::core
