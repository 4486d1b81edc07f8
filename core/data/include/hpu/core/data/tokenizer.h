// Tokenizers of the text data modules: text to token ids and back.
//   byte: every byte of the UTF-8 text is a token (vocabulary 256); any
//         text, no unknown tokens; decoding may cut a character in two.
//   char: every Unicode character of the corpus is a token, numbered in
//         code-point order; the corpus must be valid UTF-8.
//   pretrained: a Hugging Face tokenizer (tokenizer.json, or GPT-2's
//         vocab.json + merges.txt) with its tokenizer_config.json: byte-level
//         BPE (GPT-2, Llama 3, Qwen2) or SentencePiece-style BPE (Llama 2,
//         Mistral, Gemma), added and special tokens; see loadTokenizer.
// Immutable after construction: thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hpu::core::data {

// What a pretrained tokenizer's files say beyond its vocabulary
// (tokenizer_config.json, special_tokens_map.json); empty for byte and char.
struct TokenizerSettings {
  std::optional<std::int64_t> bos_id, eos_id, pad_id, unk_id;
  std::string bos_token, eos_token, pad_token, unk_token;  // their text, "" when absent
  std::string chat_template;  // tokenizer_config.json's Jinja source; "" when none
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::string name() const = 0;  // "byte", "char", or a loaded tokenizer's file
  virtual std::int64_t vocabSize() const = 0;
  // Throws DataError naming `origin` and the offset of text it cannot encode.
  virtual std::vector<std::int64_t> encode(std::string_view text, const std::string& origin) const = 0;
  virtual std::string decode(const std::vector<std::int64_t>& ids) const = 0;
  // Whether a token is one byte of UTF-8 (then loss per token is per byte).
  virtual bool byteLevel() const { return false; }
  // Special tokens and the chat template (empty for byte and char).
  virtual const TokenizerSettings& settings() const;
  // encode() with what the tokenizer's post-processor adds around a text
  // (Hugging Face's add_special_tokens=True: Llama's leading <s>); encode()
  // alone is add_special_tokens=False. Byte and char add nothing.
  virtual std::vector<std::int64_t> encodeWithSpecialTokens(std::string_view text, const std::string& origin) const {
    return encode(text, origin);
  }
  // Writes tokenizer.json, tokenizer_config.json and special_tokens_map.json
  // into `dir` (atomically, each file), in the form Hugging Face's
  // AutoTokenizer.from_pretrained loads as the same tokenizer: a loaded one
  // writes back what it read; byte and char write an equivalent BPE.
  virtual void save(const std::filesystem::path& dir) const = 0;
};

std::unique_ptr<Tokenizer> makeByteTokenizer();
// The characters of `corpus` (UTF-8; DataError naming `origin` and the byte
// offset of the first invalid sequence otherwise).
std::unique_ptr<Tokenizer> makeCharTokenizer(std::string_view corpus, const std::string& origin);
// A Hugging Face tokenizer from `path`: a model directory (tokenizer.json, or
// vocab.json + merges.txt; tokenizer_config.json, special_tokens_map.json and
// chat_template.jinja when present) or a tokenizer.json file. Encodes as the
// tokenizers library does (encode: add_special_tokens=False); decode keeps
// special tokens and applies clean_up_tokenization_spaces when the config
// asks. encodeWithSpecialTokens adds the post-processor's tokens, or, when
// tokenizer_config.json has add_bos_token / add_eos_token, bos and eos as
// they say (transformers' Llama tokenizers). name() is the file's path.
// Throws DataError naming the file (and line:column for JSON) and what it
// cannot read or does not support (by its JSON key).
std::unique_ptr<Tokenizer> loadTokenizer(const std::filesystem::path& path);

}  // namespace hpu::core::data
