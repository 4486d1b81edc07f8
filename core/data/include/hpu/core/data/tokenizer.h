// Tokenizers of the text data modules: text to token ids and back.
//   byte: every byte of the UTF-8 text is a token (vocabulary 256); any
//         text, no unknown tokens; decoding may cut a character in two.
//   char: every Unicode character of the corpus is a token, numbered in
//         code-point order; the corpus must be valid UTF-8.
// Immutable after construction: thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hpu::core::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::string name() const = 0;  // "byte", "char"
  virtual std::int64_t vocabSize() const = 0;
  // Throws DataError naming `origin` and the offset of text it cannot encode.
  virtual std::vector<std::int64_t> encode(std::string_view text, const std::string& origin) const = 0;
  virtual std::string decode(const std::vector<std::int64_t>& ids) const = 0;
  // Whether a token is one byte of UTF-8 (then loss per token is per byte).
  virtual bool byteLevel() const { return false; }
};

std::unique_ptr<Tokenizer> makeByteTokenizer();
// The characters of `corpus` (UTF-8; DataError naming `origin` and the byte
// offset of the first invalid sequence otherwise).
std::unique_ptr<Tokenizer> makeCharTokenizer(std::string_view corpus, const std::string& origin);

}  // namespace hpu::core::data
