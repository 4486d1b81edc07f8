// Unicode character classes of the pre-tokenizer regexes: \p{L} (letters,
// general category L*), \p{N} (numbers, N*) and \s (the White_Space
// property, as Oniguruma's \s in Hugging Face tokenizers); word characters;
// the canonical combining classes and decompositions of the NFC and NFD
// normalizers; and the case tables of Python's str methods
// (case_mapping.h). Pure functions; the tables are built once, thread-safe.
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
std::span<const CodeRange> casedRanges();          // Unicode's Cased
std::span<const CodeRange> caseIgnorableRanges();  // Unicode's Case_Ignorable

// Whether `c` lies in one of `ranges` (sorted, disjoint).
bool inRanges(std::span<const CodeRange> ranges, char32_t c);

// Python's one-character lower(), upper() and title() where each gives one
// character: c + offsets[0], [1], [2] for c = first, first + stride, ...,
// last. Generated, sorted by first; runs of stride 2 interleave.
struct CaseRun {
  char32_t first, last;
  int stride;
  std::int32_t offsets[3];
};
std::span<const CaseRun> caseRuns();
// Where one of them gives several characters: the three mappings, each up
// to three characters (0 ends a shorter one). Generated, sorted.
struct SpecialCase {
  char32_t code;
  char32_t mapped[3][3];
};
std::span<const SpecialCase> specialCases();

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
