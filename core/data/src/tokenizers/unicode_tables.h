// Unicode character classes of the pre-tokenizer regexes: \p{L} (letters,
// general category L*), \p{N} (numbers, N*) and \s (the White_Space
// property, as Oniguruma's \s in Hugging Face tokenizers); word characters;
// the canonical combining classes and decompositions of the NFC and NFD
// normalizers. Pure functions; the tables are built once, thread-safe.
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

struct CombiningClassRange {
  char32_t first, last;  // inclusive
  std::uint8_t combining_class;
};
// The code points whose canonical combining class is not 0.
std::span<const CombiningClassRange> combiningClassRanges();

struct CanonicalDecomposition {
  char32_t code_point, first, second;  // second: 0 for a one-character decomposition
  bool composes;                        // a primary composite: NFC composes first + second into it
};
// Every canonical decomposition mapping but the Hangul syllables' (algorithmic),
// by code point.
std::span<const CanonicalDecomposition> canonicalDecompositions();

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
