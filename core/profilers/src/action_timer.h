// The bookkeeping both profilers share: the open actions of the training
// thread, with Lightning's errors for a stop without a start and a start of
// an action already running.
// Not thread-safe: one training thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/fmt/fmt.h>

#include "hpu/core/base/errors.h"

namespace hpu::core::detail {

class ActionTimer {
 public:
  using Clock = std::chrono::steady_clock;
  struct Open {
    std::string action;
    Clock::time_point begin;
    std::uint64_t mark;  // the caller's note, returned by stop()
  };

  // Opens `action` now. Throws UsageError if it is open already.
  const Open& start(std::string_view action, std::uint64_t mark = 0) {
    for (const Open& o : open_)
      if (o.action == action) throw UsageError(fmt::format("profiler: attempted to start {} which has already started", action));
    open_.push_back({std::string(action), Clock::now(), mark});
    return open_.back();
  }
  // Closes `action` and returns it with its start. Throws UsageError if it
  // was never started.
  Open stop(std::string_view action) {
    for (auto it = open_.rbegin(); it != open_.rend(); ++it)
      if (it->action == action) {
        Open o = std::move(*it);
        open_.erase(std::next(it).base());
        return o;
      }
    throw UsageError(fmt::format("profiler: attempting to stop recording an action ({}) which was never started", action));
  }
  const std::vector<Open>& open() const { return open_; }

 private:
  std::vector<Open> open_;  // innermost last
};

}  // namespace hpu::core::detail
