// The BPE model of Hugging Face tokenizers (models/bpe in the Rust crate):
// a word's symbols (its characters, or for a byte-level vocabulary its
// bytes' GPT-2 characters) are merged pair by pair, the lowest merge rank
// first and, among equal ranks, the leftmost; byte fallback (<0xNN>
// tokens), the unknown token (fused when fuse_unk) and ignore_merges (a word
// that is a token is that token) as the crate applies them. Encoded words
// are cached. Immutable after construction except its cache, which is
// guarded: thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hpu::core::data::detail {

// Heterogeneous lookup of std::string keys by std::string_view.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIds = std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>>;

struct BpeOptions {
  std::optional<std::string> unk_token;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
  bool byte_level = false;  // words are raw bytes, each byte's symbol its GPT-2 character
};

class BpeModel {
 public:
  // `merges` are pairs of tokens in rank order. Throws std::invalid_argument
  // naming a merge whose parts or result are not in the vocabulary, or an
  // unk_token outside it (the caller adds the file and key).
  BpeModel(TokenIds vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options);
  ~BpeModel();

  // Appends the ids of one word (a pre-tokenizer's piece).
  void encodeWord(std::string_view word, std::vector<std::int64_t>& out) const;

  std::optional<std::int32_t> tokenId(std::string_view token) const;
  // The token of `id`, or nullptr for an id outside the vocabulary.
  const std::string* token(std::int64_t id) const;
  std::int64_t size() const { return static_cast<std::int64_t>(tokens_.size()); }
  const BpeOptions& options() const { return options_; }

 private:
  struct Symbol;
  struct MergeTable;
  // The initial symbols of `word`, before any merge.
  void initialSymbols(std::string_view word, std::vector<Symbol>& symbols) const;
  void mergeAll(std::vector<Symbol>& symbols) const;

  TokenIds vocab_;
  std::vector<std::string> tokens_;  // by id; "" for an unused id
  std::unique_ptr<MergeTable> merges_;
  BpeOptions options_;
  std::optional<std::int32_t> unk_id_;
  std::int32_t byte_ids_[256];   // byte-level: each byte's token, -1 if none
  std::int32_t fallback_ids_[256];  // byte_fallback: the <0xNN> tokens, -1 if none
  std::unordered_map<char32_t, std::int32_t> char_ids_;  // tokens of one character

  mutable std::shared_mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<std::int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace hpu::core::data::detail
