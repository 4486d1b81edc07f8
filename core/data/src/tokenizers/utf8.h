// UTF-8 decoding and encoding shared by the tokenizers. Pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace hpu::core::data::detail {

// A code point and the number of bytes of its UTF-8 sequence.
struct CodePoint {
  char32_t value;
  std::size_t length;
};

// The code point of the UTF-8 sequence at text[at], or nullopt for an invalid
// one (bad lead or continuation byte, overlong form, surrogate, beyond
// U+10FFFF, truncated). REQUIRES: at < text.size().
inline std::optional<CodePoint> decodeAt(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[at + i]); };
  const unsigned char lead = byte(0);
  std::size_t n;
  char32_t cp;
  if (lead < 0x80) return CodePoint{lead, 1};
  if ((lead & 0xE0) == 0xC0)
    n = 2, cp = lead & 0x1F;
  else if ((lead & 0xF0) == 0xE0)
    n = 3, cp = lead & 0x0F;
  else if ((lead & 0xF8) == 0xF0)
    n = 4, cp = lead & 0x07;
  else
    return std::nullopt;
  if (at + n > text.size()) return std::nullopt;
  for (std::size_t i = 1; i < n; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return std::nullopt;
    cp = (cp << 6) | (byte(i) & 0x3F);
  }
  static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;
  return CodePoint{cp, n};
}

// Appends the UTF-8 sequence of `cp` (REQUIRES: a code point, not a surrogate).
inline void appendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

inline std::string encodeUtf8(char32_t cp) {
  std::string s;
  appendUtf8(s, cp);
  return s;
}

}  // namespace hpu::core::data::detail
