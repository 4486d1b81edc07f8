// Durations as error messages print them: "250ms", "1.5s", "300s".
#pragma once

#include <chrono>
#include <string>

namespace hpu::comm::detail {
std::string durationText(std::chrono::milliseconds duration);
}  // namespace hpu::comm::detail
