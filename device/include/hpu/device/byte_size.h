// Byte counts as people write them: parsing "256MiB" and printing "95.70 GiB".
// Thread-safe: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hpu::device {

// Parses a positive integer with an optional unit: B, KiB, MiB, GiB, TiB
// (powers of 1024) or KB, MB, GB, TB (powers of 1000), case-insensitive, with
// optional spaces between number and unit ("256MiB", "1 GB", "4096").
// Returns nullopt for anything else, for zero, and on overflow.
std::optional<std::uint64_t> parseByteSize(std::string_view text);

// "512 B", "256 MiB" (exact multiples print without decimals), "95.70 GiB".
std::string formatByteSize(std::uint64_t bytes);

}  // namespace hpu::device
