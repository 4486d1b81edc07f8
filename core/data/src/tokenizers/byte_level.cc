#include "tokenizers/byte_level.h"

#include "tokenizers/utf8.h"

namespace hpu::core::data::detail {
namespace {

struct ByteMap {
  std::array<char32_t, 256> to_unicode{};
  std::array<std::string, 256> to_utf8;
  std::array<std::int16_t, 324> to_byte{};  // indexed by character; -1: none

  ByteMap() {
    to_byte.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_unicode[b] = printable ? static_cast<char32_t>(b) : next++;
      to_utf8[b] = encodeUtf8(to_unicode[b]);
      to_byte[to_unicode[b]] = static_cast<std::int16_t>(b);
    }
  }
};

const ByteMap& byteMap() {
  static const ByteMap map;
  return map;
}

}  // namespace

char32_t byteToUnicode(std::uint8_t b) { return byteMap().to_unicode[b]; }
const std::string& byteToUtf8(std::uint8_t b) { return byteMap().to_utf8[b]; }
std::optional<std::uint8_t> unicodeToByte(char32_t c) {
  if (c >= byteMap().to_byte.size() || byteMap().to_byte[c] < 0) return std::nullopt;
  return static_cast<std::uint8_t>(byteMap().to_byte[c]);
}

}  // namespace hpu::core::data::detail
