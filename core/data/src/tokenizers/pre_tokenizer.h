// The pre-tokenizers of the supported tokenizers, cutting a text into the
// words the BPE model encodes one by one: a sequence of steps, each cutting
// every piece of the step before it (as tokenizers' Sequence):
//   ByteLevel (GPT-2, Llama 3, Qwen2): a space before a piece not starting
//     with one when add_prefix_space; its use_regex is a Split by GPT-2's
//     pattern after it. The model reads the words' bytes, so ByteLevel
//     comes last.
//   Split: the matches of a regex of split_pattern.h (Llama 3's, Qwen2's)
//     or of a string (Gemma 2's " "), and the text between them, kept,
//     dropped or merged as the behavior says (tokenizers'
//     SplitDelimiterBehavior); invert swaps matches and the text between.
//   Metaspace (Mistral, newer Llama 2 files): spaces become the replacement
//     ("▁"), which is prepended per prepend_scheme, and words split before
//     each replacement when split.
//   none: the whole text is one word (Llama 2 and Gemma with their normalizers).
// Immutable: thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizers/split_pattern.h"

namespace hpu::core::data::detail {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct PreTokenizerStep {
  enum class Kind { kByteLevel, kSplit, kMetaspace } kind;
  bool add_prefix_space = false;  // ByteLevel
  // Split: a known regex, or else the string `literal` (an empty one matches nothing).
  std::optional<SplitPattern> pattern;
  std::string literal;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  // Metaspace
  std::string replacement = "\xE2\x96\x81";  // "▁"
  enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;
  bool split = true;  // split before each replacement
};

class PreTokenizer {
 public:
  PreTokenizer() = default;
  explicit PreTokenizer(std::vector<PreTokenizerStep> steps) : steps_(std::move(steps)) {}

  // Calls `word` with each non-empty word of `text`; `first` says whether the
  // text starts the input (Metaspace's prepend_scheme first). Words are
  // views valid during the call only. REQUIRES: `word` does not pre-tokenize.
  template <typename OnWord>
  void apply(std::string_view text, bool first, OnWord&& word) const {
    applyFrom(0, text, first, word);
  }

  // A piece of a step's text: [begin, end).
  struct Piece {
    std::uint32_t begin, end;
  };
  // A step's per-thread buffers (each step its own, so a step's pieces stay
  // valid while the steps after it cut them).
  struct Scratch {
    std::string text;
    std::vector<Piece> pieces;
    std::vector<std::uint32_t> ends;
  };

 private:
  static Scratch& scratch(std::size_t s);
  // Fills `out.pieces` with the pieces of `text` by step `s`; returns the
  // text they are pieces of (`text`, or its rewrite in `out.text`).
  std::string_view cut(std::size_t s, std::string_view text, bool first, Scratch& out) const;

  template <typename OnWord>
  void applyFrom(std::size_t s, std::string_view text, bool first, OnWord& word) const {
    if (s == steps_.size()) {
      if (!text.empty()) word(text);
      return;
    }
    Scratch& buffers = scratch(s);
    const std::string_view cut_text = cut(s, text, first, buffers);
    for (const Piece& p : buffers.pieces)
      if (p.end > p.begin) applyFrom(s + 1, cut_text.substr(p.begin, p.end - p.begin), first && p.begin == 0, word);
  }

  std::vector<PreTokenizerStep> steps_;
};

}  // namespace hpu::core::data::detail
