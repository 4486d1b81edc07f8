// The decoders of the supported tokenizers, turning tokens back into text
// as Hugging Face tokenizers' decode_chain does: each step maps the list of
// token strings to a new list, and the result is their concatenation.
//   ByteLevel: GPT-2's characters back to bytes (a token with a character
//     outside the map stays as it is), then UTF-8 with U+FFFD for invalid
//     sequences, as one string.
//   Metaspace: the replacement back to a space, except in the first token,
//     where it is dropped unless prepend_scheme is never (the crate's rule).
//   Replace (a string by another), ByteFallback (runs of <0xNN> tokens to
//     their UTF-8 text, or one U+FFFD per token when invalid), Fuse (all
//     tokens into one), Strip (up to start / stop copies of a character
//     from each token's ends), Sequence.
//   none: the tokens joined by spaces.
// Immutable: thread-safe.
#pragma once

#include <string>
#include <vector>

namespace hpu::core::data::detail {

struct DecoderStep {
  enum class Kind { kByteLevel, kMetaspace, kReplace, kByteFallback, kFuse, kStrip } kind;
  std::string pattern, content;  // Replace: pattern -> content; Metaspace: the replacement in pattern; Strip: content
  std::size_t start = 0, stop = 0;  // Strip
  bool prepend = true;             // Metaspace: prepend_scheme other than never
};

class Decoder {
 public:
  Decoder() = default;  // no decoder: tokens joined by spaces
  explicit Decoder(std::vector<DecoderStep> steps) : steps_(std::move(steps)), joined_(false) {}
  std::string decode(std::vector<std::string> tokens) const;

 private:
  std::vector<DecoderStep> steps_;
  bool joined_ = true;
};

// `bytes` as UTF-8 with each maximal invalid subsequence replaced by U+FFFD
// (Rust's String::from_utf8_lossy, the WHATWG decoder).
std::string utf8Lossy(std::string_view bytes);

}  // namespace hpu::core::data::detail
