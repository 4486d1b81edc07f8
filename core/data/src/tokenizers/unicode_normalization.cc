#include "tokenizers/unicode_normalization.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "tokenizers/unicode_tables.h"
#include "tokenizers/utf8.h"

namespace hpu::core::data::detail {
namespace {

// Hangul syllables: S = SBase + (L index * VCount + V index) * TCount + T index.
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

struct Tables {
  std::array<std::uint8_t, 0x10000> bmp_classes{};
  std::unordered_map<char32_t, std::pair<char32_t, char32_t>> decompositions;
  std::unordered_map<std::uint64_t, char32_t> compositions;  // (first << 32 | second) -> composite

  Tables() {
    for (const CombiningClassRange& r : combiningClassRanges())
      for (char32_t c = r.first; c <= r.last && c < 0x10000; ++c) bmp_classes[c] = r.combining_class;
    decompositions.reserve(canonicalDecompositions().size());
    for (const CanonicalDecomposition& d : canonicalDecompositions()) {
      decompositions.emplace(d.code_point, std::pair{d.first, d.second});
      if (d.composes) compositions.emplace(key(d.first, d.second), d.code_point);
    }
  }
  static std::uint64_t key(char32_t a, char32_t b) { return (std::uint64_t{a} << 32) | b; }

  std::uint8_t combiningClass(char32_t c) const {
    if (c < 0x10000) return bmp_classes[c];
    const auto ranges = combiningClassRanges();
    const auto it = std::upper_bound(ranges.begin(), ranges.end(), c,
                                     [](char32_t v, const CombiningClassRange& r) { return v < r.first; });
    return it != ranges.begin() && c <= std::prev(it)->last ? std::prev(it)->combining_class : 0;
  }

  void decompose(char32_t c, std::vector<char32_t>& out) const {
    if (c >= kSBase && c < kSBase + kSCount) {
      const char32_t s = c - kSBase;
      out.push_back(kLBase + s / kNCount);
      out.push_back(kVBase + (s % kNCount) / kTCount);
      if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
      return;
    }
    const auto it = decompositions.find(c);
    if (it == decompositions.end()) {
      out.push_back(c);
      return;
    }
    decompose(it->second.first, out);
    if (it->second.second != 0) decompose(it->second.second, out);
  }

  // The primary composite of a + b, or 0.
  char32_t compose(char32_t a, char32_t b) const {
    if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
      return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
    if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
      return a + (b - kTBase);
    const auto it = compositions.find(key(a, b));
    return it == compositions.end() ? 0 : it->second;
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

void normalizeUnicode(std::string_view text, NormalizationForm form, std::string& out) {
  // Below U+0300 nothing combines; NFC leaves such text as it is, and NFD
  // leaves ASCII (U+00C0 and others decompose).
  const unsigned char limit = form == NormalizationForm::kNfc ? 0xCC : 0x80;
  if (std::all_of(text.begin(), text.end(), [&](char c) { return static_cast<unsigned char>(c) < limit; })) {
    out.assign(text);
    return;
  }
  const Tables& t = tables();
  thread_local std::vector<char32_t> chars;
  thread_local std::vector<std::uint8_t> classes;
  chars.clear();
  for (std::size_t at = 0; at < text.size();) {
    const auto cp = decodeAt(text, at);
    t.decompose(cp->value, chars);
    at += cp->length;
  }
  // Canonical ordering: each run of non-starters stably sorted by class.
  classes.resize(chars.size());
  for (std::size_t i = 0; i < chars.size(); ++i) classes[i] = t.combiningClass(chars[i]);
  for (std::size_t i = 1; i < chars.size(); ++i)
    for (std::size_t j = i; j > 0 && classes[j] != 0 && classes[j - 1] > classes[j]; --j) {
      std::swap(classes[j], classes[j - 1]);
      std::swap(chars[j], chars[j - 1]);
    }
  out.clear();
  out.reserve(text.size());
  if (form == NormalizationForm::kNfd) {
    for (char32_t c : chars) appendUtf8(out, c);
    return;
  }
  // Canonical composition: a character joins the last starter unless a
  // character between them blocks it (class 0, or a class not below its own).
  std::size_t kept = 0, starter = SIZE_MAX;
  std::uint8_t last_class = 0;
  for (std::size_t i = 0; i < chars.size(); ++i) {
    const char32_t c = chars[i];
    const std::uint8_t cc = classes[i];
    if (starter != SIZE_MAX && (kept - 1 == starter || (last_class != 0 && last_class < cc)))
      if (const char32_t composite = t.compose(chars[starter], c)) {
        chars[starter] = composite;
        continue;
      }
    if (cc == 0) starter = kept;
    chars[kept++] = c;
    last_class = cc;
  }
  for (std::size_t i = 0; i < kept; ++i) appendUtf8(out, chars[i]);
}

}  // namespace hpu::core::data::detail
