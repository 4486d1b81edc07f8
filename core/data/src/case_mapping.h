// Python's str.lower / upper / title / capitalize on code points, from
// tables generated from Python's unicodedata (tokenizers/unicode_tables.h):
// the same results whatever the process's locale. Full case mappings, as
// Python's: 'ß'.upper() is "SS", 'İ'.lower() is "i̇" (i and U+0307), 'ǆ'.title()
// is 'ǅ'; lower() writes a capital sigma that ends a word as 'ς' (Unicode's
// Final_Sigma, as CPython). No language-specific rules (Turkish dotless i).
// Pure functions; thread-safe.
#pragma once

#include <span>
#include <vector>

namespace hpu::core::data::detail {

std::vector<char32_t> lowerCase(std::span<const char32_t> text);
std::vector<char32_t> upperCase(std::span<const char32_t> text);
// Python's str.title: a character after one without case is title-cased, the others lowered.
std::vector<char32_t> titleCase(std::span<const char32_t> text);
// Python's str.capitalize: the first character title-cased, the rest lowered.
std::vector<char32_t> capitalized(std::span<const char32_t> text);
// Unicode's Cased: a letter with case (lower, upper or title).
bool isCased(char32_t c);

}  // namespace hpu::core::data::detail
