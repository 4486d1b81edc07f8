// Added tokens (tokenizer.json's "added_tokens"): strings that become one
// token wherever they occur, before the model sees the text. As Hugging
// Face's AddedVocabulary: the leftmost, then longest, occurrence wins;
// single_word requires no word character (\w) on either side; lstrip / rstrip
// take the whitespace before / after it into the token. Tokens with
// normalized=false are found in the input, the others in the normalized
// text. Immutable: thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hpu::core::data::detail {

struct AddedToken {
  std::int32_t id = 0;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

// Finds a set of added tokens in text.
class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);
  bool empty() const { return tokens_.empty(); }

  // A part of a text: a run of text (id -1) or an added token.
  struct Part {
    std::size_t begin, end;
    std::int32_t id;
  };
  // Appends the parts of `text`, in order, covering it; no empty run.
  void split(std::string_view text, std::vector<Part>& parts) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, std::int32_t>> next;
    std::int32_t token = -1;  // index into tokens_ of the token ending here
  };
  // The longest token at text[at], as an index into tokens_, and its length.
  std::pair<std::int32_t, std::size_t> longestAt(std::string_view text, std::size_t at) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_;
  bool starts_[256] = {};
};

}  // namespace hpu::core::data::detail
