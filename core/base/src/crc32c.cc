#include "hpu/core/base/crc32c.h"

#include <array>

namespace hpu::core {
namespace {

// One byte at a time over a 256-entry table of the reflected polynomial.
constexpr std::array<std::uint32_t, 256> makeTable() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<std::uint32_t, 256> kTable = makeTable();

}  // namespace

std::uint32_t crc32c(std::string_view bytes, std::uint32_t crc) {
  crc = ~crc;
  for (const char ch : bytes) crc = kTable[(crc ^ static_cast<unsigned char>(ch)) & 0xffu] ^ (crc >> 8);
  return ~crc;
}

}  // namespace hpu::core
