#include "tokenizers/added_tokens.h"

#include "tokenizers/unicode_tables.h"
#include "tokenizers/utf8.h"

namespace hpu::core::data::detail {
namespace {

// The code point that ends text[0, end), or 0 at the start.
char32_t charBefore(std::string_view text, std::size_t end) {
  std::size_t at = end;
  while (at > 0 && (static_cast<unsigned char>(text[at - 1]) & 0xC0) == 0x80) --at;
  if (at == 0) return end == 0 ? 0 : 0xFFFD;
  --at;
  const auto cp = decodeAt(text, at);
  return cp ? cp->value : 0xFFFD;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)), trie_(1) {
  for (std::size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& s = tokens_[t].content;
    if (s.empty()) continue;
    starts_[static_cast<unsigned char>(s[0])] = true;
    std::int32_t node = 0;
    for (unsigned char c : s) {
      std::int32_t child = -1;
      for (const auto& [byte, index] : trie_[node].next)
        if (byte == c) child = index;
      if (child < 0) {
        child = static_cast<std::int32_t>(trie_.size());
        trie_[node].next.emplace_back(c, child);
        trie_.emplace_back();
      }
      node = child;
    }
    if (trie_[node].token < 0) trie_[node].token = static_cast<std::int32_t>(t);
  }
}

std::pair<std::int32_t, std::size_t> AddedTokenMatcher::longestAt(std::string_view text, std::size_t at) const {
  std::pair<std::int32_t, std::size_t> best{-1, 0};
  std::int32_t node = 0;
  for (std::size_t i = at; i < text.size(); ++i) {
    std::int32_t child = -1;
    for (const auto& [byte, index] : trie_[node].next)
      if (byte == static_cast<unsigned char>(text[i])) child = index;
    if (child < 0) break;
    node = child;
    if (trie_[node].token >= 0) best = {trie_[node].token, i + 1 - at};
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Part>& parts) const {
  std::size_t done = 0;  // text before it is in parts
  for (std::size_t at = 0; at < text.size();) {
    if (!starts_[static_cast<unsigned char>(text[at])]) {
      ++at;
      continue;
    }
    const auto [index, length] = longestAt(text, at);
    if (index < 0) {
      ++at;
      continue;
    }
    const AddedToken& token = tokens_[static_cast<std::size_t>(index)];
    std::size_t begin = at, end = at + length;
    at = end;
    if (token.single_word) {
      const bool space_before = begin == 0 || !isWordChar(charBefore(text, begin));
      const auto after = end < text.size() ? decodeAt(text, end) : std::nullopt;
      const bool space_after = end == text.size() || !(after && isWordChar(after->value));
      if (!space_before || !space_after) continue;
    }
    if (token.lstrip) {
      while (begin > done) {
        const char32_t c = charBefore(text, begin);
        if (!isWhitespace(c)) break;
        begin -= encodeUtf8(c).size();
      }
    }
    if (token.rstrip) {
      while (end < text.size()) {
        const auto c = decodeAt(text, end);
        if (!c || !isWhitespace(c->value)) break;
        end += c->length;
      }
      at = end;
    }
    if (done < begin) parts.push_back({done, begin, -1});
    parts.push_back({begin, end, token.id});
    done = end;
  }
  if (done < text.size()) parts.push_back({done, text.size(), -1});
}

}  // namespace hpu::core::data::detail
