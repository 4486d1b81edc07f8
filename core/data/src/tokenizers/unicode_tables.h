// Unicode character classes of the pre-tokenizer regexes: \p{L} (letters,
// general category L*), \p{N} (numbers, N*) and \s (the White_Space
// property, as Oniguruma's \s in Hugging Face tokenizers); word characters. Pure functions;
// the tables are built once, thread-safe.
#pragma once

#include <cstdint>
#include <span>

namespace hpu::core::data::detail {

struct CodeRange {
  char32_t first, last;  // inclusive
};
// Generated (unicode_tables.cc): sorted, disjoint.
std::span<const CodeRange> letterRanges();
std::span<const CodeRange> numberRanges();
std::span<const CodeRange> wordExtraRanges();  // word characters that are not letters

enum class CharClass : std::uint8_t { kOther, kLetter, kNumber, kSpace };
CharClass charClass(char32_t c);

// A word character as Rust regex's \w (letters, marks, decimal digits,
// connector punctuation, joiners): single_word's boundary.
bool isWordChar(char32_t c);

// Unicode White_Space (Rust's char::is_whitespace).
constexpr bool isWhitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace hpu::core::data::detail
