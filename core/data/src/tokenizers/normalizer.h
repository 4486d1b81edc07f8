// The normalizers of the supported tokenizers: a sequence of Prepend (a
// string before a non-empty text), Replace (every occurrence of a string by
// another), as Llama 2's and Gemma's "▁" metaspace, and the Unicode
// normalization forms NFC (Qwen2) and NFD. Immutable: thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hpu::core::data::detail {

struct NormalizerStep {
  enum class Kind { kPrepend, kReplace, kNfc, kNfd } kind;
  std::string pattern;  // Replace: what is replaced (non-empty)
  std::string content;  // Prepend: the prefix; Replace: the replacement
};

class Normalizer {
 public:
  Normalizer() = default;
  explicit Normalizer(std::vector<NormalizerStep> steps) : steps_(std::move(steps)) {}
  bool empty() const { return steps_.empty(); }
  // `text` normalized, in `out` (REQUIRES: out does not alias text).
  void apply(std::string_view text, std::string& out) const;

 private:
  std::vector<NormalizerStep> steps_;
};

// Every occurrence of `pattern` in `text` replaced by `content`, into `out`.
void replaceAll(std::string_view text, std::string_view pattern, std::string_view content, std::string& out);

}  // namespace hpu::core::data::detail
