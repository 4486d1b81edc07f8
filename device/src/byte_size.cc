#include "hpu/device/byte_size.h"

#include <fmt/core.h>

#include <array>
#include <charconv>
#include <limits>
#include <utility>

#include "hpu/device/text.h"

namespace hpu::device {

using detail::toLower;
using detail::trim;

std::optional<std::uint64_t> parseByteSize(std::string_view text) {
  static constexpr std::array<std::pair<std::string_view, std::uint64_t>, 9> kUnits{{
      {"B", 1},
      {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"TiB", 1ull << 40},
      {"KB", 1000ull}, {"MB", 1000ull * 1000}, {"GB", 1000ull * 1000 * 1000},
      {"TB", 1000ull * 1000 * 1000 * 1000},
  }};
  text = trim(text);
  std::uint64_t number = 0;
  const char* end = text.data() + text.size();
  auto [next, ec] = std::from_chars(text.data(), end, number);
  if (ec != std::errc() || next == text.data()) return std::nullopt;
  const std::string unit = toLower(trim(std::string_view(next, static_cast<std::size_t>(end - next))));
  std::uint64_t multiplier = 1;
  if (!unit.empty()) {
    bool known = false;
    for (const auto& [name, factor] : kUnits) {
      if (unit == toLower(name)) {
        multiplier = factor;
        known = true;
        break;
      }
    }
    if (!known) return std::nullopt;
  }
  if (number == 0 || number > std::numeric_limits<std::uint64_t>::max() / multiplier) return std::nullopt;
  return number * multiplier;
}

std::string formatByteSize(std::uint64_t bytes) {
  static constexpr std::array<std::string_view, 4> kUnits{"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  std::size_t unit = 0;
  std::uint64_t scale = 1024;
  while (unit + 1 < kUnits.size() && bytes >= scale * 1024) {
    scale *= 1024;
    ++unit;
  }
  if (bytes % scale == 0) return fmt::format("{} {}", bytes / scale, kUnits[unit]);
  return fmt::format("{:.2f} {}", static_cast<double>(bytes) / static_cast<double>(scale), kUnits[unit]);
}

}  // namespace hpu::device
