#include "duration_text.h"

#include <spdlog/fmt/fmt.h>

namespace hpu::comm::detail {

std::string durationText(std::chrono::milliseconds duration) {
  const auto ms = duration.count();
  if (ms < 1000) return fmt::format("{}ms", ms);
  if (ms % 1000 == 0) return fmt::format("{}s", ms / 1000);
  return fmt::format("{:.1f}s", static_cast<double>(ms) / 1000.0);
}

}  // namespace hpu::comm::detail
