#include <algorithm>
#include <array>

#include "tokenizers/unicode_tables.h"

namespace hpu::core::data::detail {

bool inRanges(std::span<const CodeRange> ranges, char32_t c) {
  const auto it = std::upper_bound(ranges.begin(), ranges.end(), c,
                                   [](char32_t v, const CodeRange& r) { return v < r.first; });
  return it != ranges.begin() && c <= std::prev(it)->last;
}

namespace {

CharClass lookUp(char32_t c) {
  if (isWhitespace(c)) return CharClass::kSpace;
  if (inRanges(letterRanges(), c)) return CharClass::kLetter;
  if (inRanges(numberRanges(), c)) return CharClass::kNumber;
  return CharClass::kOther;
}

// The Basic Multilingual Plane by table (64 KiB); the planes above by search.
struct BmpClasses {
  std::array<CharClass, 0x10000> classes;
  BmpClasses() {
    for (char32_t c = 0; c < 0x10000; ++c) classes[c] = lookUp(c);
  }
};

}  // namespace

CharClass charClass(char32_t c) {
  static const BmpClasses bmp;
  return c < 0x10000 ? bmp.classes[c] : lookUp(c);
}

bool isWordChar(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
  return charClass(c) == CharClass::kLetter || inRanges(wordExtraRanges(), c);
}

}  // namespace hpu::core::data::detail
