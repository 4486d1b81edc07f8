// The pre-tokenizers of the supported tokenizers, cutting a text into the
// words the BPE model encodes one by one:
//   ByteLevel (GPT-2): an optional leading space, GPT-2's pattern when
//     use_regex; the model reads the words' bytes.
//   Sequence [Split(pattern, Isolated), ByteLevel(use_regex false)] (Llama 3).
//   Metaspace (Mistral, newer Llama 2 files): spaces become the replacement
//     ("▁"), which is prepended per prepend_scheme, and words split before
//     each replacement when split.
//   none: the whole text is one word (Llama 2 with its normalizer).
// Immutable: thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizers/normalizer.h"
#include "tokenizers/split_pattern.h"

namespace hpu::core::data::detail {

struct PreTokenizer {
  std::optional<SplitPattern> pattern;  // split into the pattern's pieces first
  bool add_prefix_space = false;        // ByteLevel: a space before a text not starting with one
  bool metaspace = false;
  std::string replacement = "\xE2\x96\x81";  // Metaspace: "▁"
  enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;
  bool split = true;  // Metaspace: split before each replacement

  // Calls `word` with each word of `text`; `first` says whether the text
  // starts the input (Metaspace's prepend_scheme first). Words are views
  // valid during the call only.
  template <typename OnWord>
  void apply(std::string_view text, bool first, OnWord&& word) const;
};

template <typename OnWord>
void PreTokenizer::apply(std::string_view text, bool first, OnWord&& word) const {
  thread_local std::string buffer;
  thread_local std::vector<std::uint32_t> ends;
  if (metaspace) {
    replaceAll(text, " ", replacement, buffer);
    if (!buffer.starts_with(replacement) && (prepend == Prepend::kAlways || (prepend == Prepend::kFirst && first)))
      buffer.insert(0, replacement);
    text = buffer;
    if (!split) return word(text);
    std::size_t start = 0;
    for (std::size_t at = text.find(replacement, 1); at != std::string_view::npos;
         at = text.find(replacement, at + replacement.size())) {
      word(text.substr(start, at - start));
      start = at;
    }
    return word(text.substr(start));
  }
  if (add_prefix_space && !text.starts_with(' ')) {
    buffer.assign(" ").append(text);
    text = buffer;
  }
  if (!pattern) return word(text);
  const std::size_t first_end = ends.size();  // apply may nest through `word`: keep ours apart
  splitByPattern(*pattern, text, ends);
  std::uint32_t start = 0;
  for (std::size_t i = first_end; i < ends.size(); ++i) {
    word(text.substr(start, ends[i] - start));
    start = ends[i];
  }
  ends.resize(first_end);
}

}  // namespace hpu::core::data::detail
