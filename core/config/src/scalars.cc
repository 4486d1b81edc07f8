#include "hpu/core/config/scalars.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace hpu::core::config {
namespace {
std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (same ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}
}  // namespace

std::optional<bool> parseBool(std::string_view s) {
  const std::string l = lower(s);
  if (l == "true" || l == "yes" || l == "on") return true;
  if (l == "false" || l == "no" || l == "off") return false;
  return std::nullopt;
}

std::optional<std::int64_t> parseInt(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::optional<double> parseFloat(std::string_view s) {
  const std::string l = lower(s);
  if (l == ".inf" || l == "+.inf" || l == "inf" || l == "+inf" || l == "infinity")
    return std::numeric_limits<double>::infinity();
  if (l == "-.inf" || l == "-inf" || l == "-infinity") return -std::numeric_limits<double>::infinity();
  if (l == ".nan" || l == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (l.empty()) return std::nullopt;
  // strtod accepts hex floats and leading spaces; YAML does not.
  if (std::isspace(static_cast<unsigned char>(l.front())) || l.find('x') != std::string::npos)
    return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(l.c_str(), &end);
  if (end != l.c_str() + l.size()) return std::nullopt;
  return v;
}

std::string formatFloat(double v) {
  std::string s = fmt::format("{}", v);
  // A spelling every YAML reader takes as a float, PyYAML's (and so
  // LightningCLI's) included: it wants a '.' before an exponent ("1.0e-08").
  if (s.find_first_of(".n") != std::string::npos) return s;
  const auto e = s.find('e');
  return e == std::string::npos ? s + ".0" : s.insert(e, ".0");
}

namespace {
// Farthest edit distance at which `word` still reads as a typo of a candidate.
std::size_t typoLimit(std::string_view word) { return std::max<std::size_t>(2, word.size() / 3); }
}  // namespace

std::optional<std::string> closestMatch(std::string_view word,
                                        const std::vector<std::string>& candidates) {
  const auto near = closeMatches(word, candidates, 1);
  if (near.empty() || candidates[near[0]] == word) return std::nullopt;
  return candidates[near[0]];
}

std::vector<std::size_t> closeMatches(std::string_view word, const std::vector<std::string>& candidates,
                                      std::size_t count) {
  std::vector<std::pair<std::size_t, std::size_t>> near;  // (distance, index)
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (const std::size_t d = editDistance(word, candidates[i]); d <= typoLimit(word)) near.emplace_back(d, i);
  std::stable_sort(near.begin(), near.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::size_t> out;
  for (const auto& [d, i] : near)
    if (out.size() < count) out.push_back(i);
  return out;
}

std::string didYouMean(std::string_view word, const std::vector<std::string>& candidates) {
  auto m = closestMatch(word, candidates);
  return m ? "; did you mean '" + *m + "'?" : "";
}

}  // namespace hpu::core::config
