#include "case_mapping.h"

#include <algorithm>
#include <array>
#include <unordered_map>

#include "tokenizers/unicode_tables.h"

namespace hpu::core::data::detail {
namespace {

constexpr char32_t kCapitalSigma = 0x03A3, kFinalSigma = 0x03C2;

enum Mapping { kLower = 0, kUpper = 1, kTitle = 2 };

// A character's three mappings, each up to three characters (0 ends one).
using Mapped = std::array<std::array<char32_t, 3>, 3>;

// The generated runs and special cases, expanded once into one map.
const std::unordered_map<char32_t, Mapped>& caseTable() {
  static const std::unordered_map<char32_t, Mapped> table = [] {
    std::unordered_map<char32_t, Mapped> t;
    for (const CaseRun& r : caseRuns())
      for (char32_t c = r.first; c <= r.last; c += static_cast<char32_t>(r.stride)) {
        Mapped m{};
        for (int k = 0; k < 3; ++k) m[k][0] = static_cast<char32_t>(static_cast<std::int32_t>(c) + r.offsets[k]);
        t.emplace(c, m);
      }
    for (const SpecialCase& s : specialCases()) {
      Mapped m{};
      for (int k = 0; k < 3; ++k) std::copy(std::begin(s.mapped[k]), std::end(s.mapped[k]), m[k].begin());
      t.emplace(s.code, m);
    }
    return t;
  }();
  return table;
}

void appendMapped(char32_t c, Mapping which, std::vector<char32_t>& out) {
  const auto& table = caseTable();
  const auto it = table.find(c);
  if (it == table.end()) {
    out.push_back(c);
    return;
  }
  for (const char32_t m : it->second[which])
    if (m != 0) out.push_back(m);
}

bool isCaseIgnorable(char32_t c) { return inRanges(caseIgnorableRanges(), c); }

// CPython's rule: the capital sigma at `i` ends a word when a cased
// character precedes it and none follows it, case-ignorable ones skipped.
bool endsWord(std::span<const char32_t> text, std::size_t i) {
  std::size_t j = i;
  while (j > 0 && isCaseIgnorable(text[j - 1])) --j;
  if (j == 0 || !isCased(text[j - 1])) return false;
  std::size_t k = i + 1;
  while (k < text.size() && isCaseIgnorable(text[k])) ++k;
  return k == text.size() || !isCased(text[k]);
}

// Python's lower of text[i] in its context.
void appendLower(std::span<const char32_t> text, std::size_t i, std::vector<char32_t>& out) {
  if (text[i] == kCapitalSigma && endsWord(text, i))
    out.push_back(kFinalSigma);
  else
    appendMapped(text[i], kLower, out);
}

}  // namespace

bool isCased(char32_t c) { return inRanges(casedRanges(), c); }

std::vector<char32_t> lowerCase(std::span<const char32_t> text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) appendLower(text, i, out);
  return out;
}

std::vector<char32_t> upperCase(std::span<const char32_t> text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  for (const char32_t c : text) appendMapped(c, kUpper, out);
  return out;
}

std::vector<char32_t> titleCase(std::span<const char32_t> text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  bool previous_cased = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (previous_cased)
      appendLower(text, i, out);
    else
      appendMapped(text[i], kTitle, out);
    previous_cased = isCased(text[i]);
  }
  return out;
}

std::vector<char32_t> capitalized(std::span<const char32_t> text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (i == 0)
      appendMapped(text[i], kTitle, out);
    else
      appendLower(text, i, out);
  }
  return out;
}

}  // namespace hpu::core::data::detail
