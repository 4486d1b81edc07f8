// A Hugging Face tokenizer read from its files: the pipeline of tokenizers'
// Tokenizer::encode (added tokens, normalizer, pre-tokenizer, BPE model,
// post-processor) and decode (the decoder). Immutable but for the model's
// word cache: thread-safe.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hpu/core/data/tokenizer.h"
#include "tokenizers/added_tokens.h"
#include "tokenizers/bpe_model.h"
#include "tokenizers/decoder.h"
#include "tokenizers/normalizer.h"
#include "tokenizers/pre_tokenizer.h"

namespace hpu::core::data::detail {

// What tokenizer.json describes.
struct TokenizerPipeline {
  std::vector<AddedToken> added_tokens;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  // The post-processor's template for one sequence: ids before and after it.
  std::vector<std::int64_t> prefix, suffix;
  Decoder decoder;
  // tokenizer_config.json's clean_up_tokenization_spaces (transformers'
  // decode): " ." -> ".", " n't" -> "n't" and the like after decoding.
  bool clean_up_spaces = false;
};

// tokenizer.json's text parsed; DataError naming `origin` and the key of
// what is malformed or not supported.
TokenizerPipeline parseTokenizerJson(const std::string& json_text, const std::string& origin);

// The id of a token: an added token's, else the model's.
std::optional<std::int64_t> findTokenId(const TokenizerPipeline& pipeline, std::string_view token);

class PretrainedTokenizer final : public Tokenizer {
 public:
  // `files`: what save() writes back, by file name.
  PretrainedTokenizer(std::string name, TokenizerPipeline pipeline, TokenizerSettings settings,
                      std::map<std::string, std::string> files);

  std::string name() const override { return name_; }
  std::int64_t vocabSize() const override { return vocab_size_; }
  std::vector<std::int64_t> encode(std::string_view text, const std::string& origin) const override;
  std::vector<std::int64_t> encodeWithSpecialTokens(std::string_view text, const std::string& origin) const override;
  // Tokens of ids outside the vocabulary are left out, as tokenizers does.
  std::string decode(const std::vector<std::int64_t>& ids) const override;
  const TokenizerSettings& settings() const override { return settings_; }
  void save(const std::filesystem::path& dir) const override;

 private:
  struct Scratch;
  void encodeRun(std::string_view text, bool first, std::vector<std::int64_t>& out, Scratch& scratch) const;

  std::string name_;
  TokenizerPipeline p_;
  TokenizerSettings settings_;
  std::map<std::string, std::string> files_;
  AddedTokenMatcher raw_tokens_, normalized_tokens_;
  std::map<std::int64_t, std::string> added_by_id_;
  std::int64_t vocab_size_ = 0;
};

}  // namespace hpu::core::data::detail
