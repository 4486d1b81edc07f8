// The pre-tokenizer regexes of the supported models, as hand-written
// scanners (no regex engine): each cuts text into the pieces that the
// pattern's successive leftmost matches give, with \p{L}, \p{N} and \s as
// Unicode's letters, numbers and White_Space. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace hpu::core::data::detail {

enum class SplitPattern {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  // (GPT-2; the ByteLevel pre-tokenizer's use_regex).
  kGpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+   (Llama 3).
  kLlama3,
  // Llama 3's with \p{N} for \p{N}{1,3} (Qwen2).
  kLlama3SingleDigits,
};

// The pattern whose regex source (as tokenizer.json spells it) is `regex`.
std::optional<SplitPattern> findSplitPattern(std::string_view regex);
// The regex source of a pattern.
std::string_view splitPatternRegex(SplitPattern pattern);

// Appends the end offset of every piece of `text` (the pieces are
// contiguous and cover it). REQUIRES: `text` is valid UTF-8.
void splitByPattern(SplitPattern pattern, std::string_view text, std::vector<std::uint32_t>& ends);

}  // namespace hpu::core::data::detail
