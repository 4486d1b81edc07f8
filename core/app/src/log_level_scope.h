// The log's level lowered for a scope (shape-only rehearsals and traces, whose
// parts would otherwise say again what the real run says), restored at its end.
#pragma once

#include <spdlog/spdlog.h>

namespace hpu::core::app {

class LogLevelScope {
 public:
  explicit LogLevelScope(spdlog::level::level_enum level) : previous_(spdlog::get_level()) { spdlog::set_level(level); }
  ~LogLevelScope() { spdlog::set_level(previous_); }
  LogLevelScope(const LogLevelScope&) = delete;
  LogLevelScope& operator=(const LogLevelScope&) = delete;

 private:
  spdlog::level::level_enum previous_;
};

}  // namespace hpu::core::app
