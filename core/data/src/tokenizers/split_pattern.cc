#include "tokenizers/split_pattern.h"

#include "tokenizers/unicode_tables.h"
#include "tokenizers/utf8.h"

namespace hpu::core::data::detail {
namespace {

constexpr std::string_view kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3SingleDigitsRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Char {
  std::uint32_t offset;
  char32_t cp;
  CharClass cls;
};

// The text's characters, and a sentinel at its end (class kOther, cp 0).
void decodeChars(std::string_view text, std::vector<Char>& chars) {
  chars.clear();
  for (std::size_t at = 0; at < text.size();) {
    const auto b = static_cast<unsigned char>(text[at]);
    char32_t cp = b;
    std::size_t length = 1;
    if (b >= 0x80) {
      const auto decoded = decodeAt(text, at);
      cp = decoded ? decoded->value : 0xFFFD;
      length = decoded ? decoded->length : 1;
    }
    chars.push_back({static_cast<std::uint32_t>(at), cp, charClass(cp)});
    at += length;
  }
  chars.push_back({static_cast<std::uint32_t>(text.size()), 0, CharClass::kOther});
}

class Scanner {
 public:
  Scanner(const std::vector<Char>& chars) : c_(chars), n_(chars.size() - 1) {}

  // GPT-2's pattern: the end of the match at i.
  std::size_t gpt2(std::size_t i) const {
    if (const std::size_t end = contraction(i, false)) return end;
    const std::size_t j = (cp(i) == ' ' && i + 1 < n_ && cls(i + 1) != CharClass::kSpace) ? i + 1 : i;
    if (cls(j) != CharClass::kSpace) return run(j, cls(j));  // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+'
    return whitespace(i);
  }

  // Llama 3's pattern (digits: 3, or 1 for the single-digit variant).
  std::size_t llama3(std::size_t i, std::size_t digits) const {
    if (const std::size_t end = contraction(i, true)) return end;
    if (cls(i) == CharClass::kLetter) return run(i, CharClass::kLetter);
    if (cls(i) != CharClass::kNumber && cp(i) != '\r' && cp(i) != '\n' && i + 1 < n_ &&
        cls(i + 1) == CharClass::kLetter)
      return run(i + 1, CharClass::kLetter);
    if (cls(i) == CharClass::kNumber) {
      std::size_t end = i;
      while (end < n_ && end - i < digits && cls(end) == CharClass::kNumber) ++end;
      return end;
    }
    const std::size_t j = (cp(i) == ' ' && i + 1 < n_ && cls(i + 1) == CharClass::kOther) ? i + 1 : i;
    if (cls(j) == CharClass::kOther) {
      std::size_t end = run(j, CharClass::kOther);
      while (end < n_ && (cp(end) == '\r' || cp(end) == '\n')) ++end;
      return end;
    }
    // \s*[\r\n]+: up to the run's last line break, if it has one.
    const std::size_t end = run(i, CharClass::kSpace);
    for (std::size_t k = end; k > i; --k)
      if (cp(k - 1) == '\r' || cp(k - 1) == '\n') return k;
    return whitespace(i);
  }

 private:
  char32_t cp(std::size_t i) const { return c_[i].cp; }
  CharClass cls(std::size_t i) const { return c_[i].cls; }
  std::size_t run(std::size_t i, CharClass k) const {
    while (i < n_ && cls(i) == k) ++i;
    return i;
  }
  // \s+(?!\S)|\s+ at whitespace i: the run, less its last character when
  // a non-space follows and the run has two or more.
  std::size_t whitespace(std::size_t i) const {
    const std::size_t end = run(i, CharClass::kSpace);
    if (end == n_ || end - i < 2) return end;
    return end - 1;
  }
  static char32_t fold(char32_t c, bool ignore_case) {
    if (!ignore_case) return c;
    if (c >= 'A' && c <= 'Z') return c + ('a' - 'A');
    if (c == 0x017F) return 's';  // LATIN SMALL LETTER LONG S folds to s
    return c;
  }
  // 's|'t|'re|'ve|'m|'ll|'d at i: its end, or 0.
  std::size_t contraction(std::size_t i, bool ignore_case) const {
    if (cp(i) != '\'' || i + 1 >= n_) return 0;
    const char32_t a = fold(cp(i + 1), ignore_case);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if (i + 2 >= n_) return 0;
    const char32_t b = fold(cp(i + 2), ignore_case);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return 0;
  }

  const std::vector<Char>& c_;
  std::size_t n_;
};

}  // namespace

std::optional<SplitPattern> findSplitPattern(std::string_view regex) {
  for (SplitPattern p : {SplitPattern::kGpt2, SplitPattern::kLlama3, SplitPattern::kLlama3SingleDigits})
    if (regex == splitPatternRegex(p)) return p;
  return std::nullopt;
}

std::string_view splitPatternRegex(SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::kGpt2:
      return kGpt2Regex;
    case SplitPattern::kLlama3:
      return kLlama3Regex;
    case SplitPattern::kLlama3SingleDigits:
      return kLlama3SingleDigitsRegex;
  }
  return {};
}

void splitByPattern(SplitPattern pattern, std::string_view text, std::vector<std::uint32_t>& ends) {
  thread_local std::vector<Char> chars;
  decodeChars(text, chars);
  const Scanner scanner(chars);
  const std::size_t n = chars.size() - 1;
  for (std::size_t i = 0; i < n;) {
    const std::size_t end = pattern == SplitPattern::kGpt2     ? scanner.gpt2(i)
                            : pattern == SplitPattern::kLlama3 ? scanner.llama3(i, 3)
                                                               : scanner.llama3(i, 1);
    ends.push_back(chars[end].offset);
    i = end;
  }
}

}  // namespace hpu::core::data::detail
