// Parsing of YAML scalar text into typed values, as the config accepts them.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hpu::core::config {

// true/false/yes/no/on/off in any case.
std::optional<bool> parseBool(std::string_view s);
// Decimal integers with optional sign; no overflow, no fraction.
std::optional<std::int64_t> parseInt(std::string_view s);
// Any float spelling YAML accepts, including .inf/.nan (callers reject them).
std::optional<double> parseFloat(std::string_view s);
// Shortest text that parses back to exactly `v`, with a '.' as PyYAML wants
// it ("0.001", "1.0e-05", "3.0").
std::string formatFloat(double v);

// The registered or listed name closest to `word` by edit distance, if close
// enough to be a likely typo.
std::optional<std::string> closestMatch(std::string_view word,
                                        const std::vector<std::string>& candidates);
// Indices of up to `count` candidates close enough to `word` to be what was
// meant (equal ones included), closest first.
std::vector<std::size_t> closeMatches(std::string_view word, const std::vector<std::string>& candidates,
                                      std::size_t count);
// "; did you mean 'x'?" or "".
std::string didYouMean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace hpu::core::config
