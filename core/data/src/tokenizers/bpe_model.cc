#include "tokenizers/bpe_model.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>

#include "tokenizers/byte_level.h"
#include "tokenizers/utf8.h"

namespace hpu::core::data::detail {

struct BpeModel::Symbol {
  std::int32_t id;
  std::int32_t prev, next;  // neighbours' indices, -1 at the ends
  std::uint32_t length;     // bytes of the word it covers; 0 once merged into its left neighbour
};

// Merge ranks by pair of token ids: open addressing over a power-of-two table.
struct BpeModel::MergeTable {
  struct Entry {
    std::uint64_t key = kEmpty;
    std::int32_t rank = 0, merged = 0;
  };
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  std::vector<Entry> entries;
  std::uint64_t mask = 0;

  explicit MergeTable(std::size_t n) {
    std::size_t capacity = 16;
    while (capacity < 2 * n + 1) capacity *= 2;
    entries.resize(capacity);
    mask = capacity - 1;
  }
  static std::uint64_t key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  }
  static std::uint64_t slot(std::uint64_t k) { return (k * 0x9E3779B97F4A7C15ull) >> 20; }
  // Keeps the first (lowest-ranked) merge of a pair, as the crate does.
  void insert(std::int32_t a, std::int32_t b, std::int32_t rank, std::int32_t merged) {
    const std::uint64_t k = key(a, b);
    for (std::uint64_t i = slot(k) & mask;; i = (i + 1) & mask) {
      if (entries[i].key == k) return;
      if (entries[i].key == kEmpty) {
        entries[i] = {k, rank, merged};
        return;
      }
    }
  }
  const Entry* find(std::int32_t a, std::int32_t b) const {
    const std::uint64_t k = key(a, b);
    for (std::uint64_t i = slot(k) & mask;; i = (i + 1) & mask) {
      if (entries[i].key == k) return &entries[i];
      if (entries[i].key == kEmpty) return nullptr;
    }
  }
};

namespace {

// Words longer than this are encoded without caching (the crate's MAX_LENGTH).
constexpr std::size_t kMaxCachedWord = 256;
constexpr std::size_t kMaxCacheEntries = 1 << 18;

}  // namespace

BpeModel::BpeModel(TokenIds vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                   BpeOptions options)
    : vocab_(std::move(vocab)), merges_(std::make_unique<MergeTable>(merges.size())), options_(std::move(options)) {
  std::int32_t max_id = -1;
  for (const auto& [token, id] : vocab_) max_id = std::max(max_id, id);
  tokens_.resize(static_cast<std::size_t>(max_id + 1));
  for (const auto& [token, id] : vocab_) {
    tokens_[static_cast<std::size_t>(id)] = token;
    const auto cp = token.empty() ? std::nullopt : decodeAt(token, 0);
    if (cp && cp->length == token.size()) char_ids_.emplace(cp->value, id);
  }
  const auto idOf = [&](const std::string& token, const char* what) {
    const auto it = vocab_.find(token);
    if (it == vocab_.end()) throw std::invalid_argument(fmt::format("{} '{}' is not in the vocabulary", what, token));
    return it->second;
  };
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const std::string merged = a + b;
    const std::string what = fmt::format("merge {} ('{} {}')", rank, a, b);
    merges_->insert(idOf(a, "the first part of a"), idOf(b, "the second part of a"), static_cast<std::int32_t>(rank),
                    vocab_.contains(merged) ? vocab_.at(merged) : idOf(merged, ("the result of " + what).c_str()));
  }
  if (options_.unk_token) unk_id_ = idOf(*options_.unk_token, "unk_token");
  for (int b = 0; b < 256; ++b) {
    const auto byte = tokenId(byteToUtf8(static_cast<std::uint8_t>(b)));
    byte_ids_[b] = byte ? *byte : -1;
    const auto fallback = tokenId(fmt::format("<0x{:02X}>", b));
    fallback_ids_[b] = fallback ? *fallback : -1;
  }
}

BpeModel::~BpeModel() = default;

std::optional<std::int32_t> BpeModel::tokenId(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::token(std::int64_t id) const {
  if (id < 0 || id >= size() || tokens_[static_cast<std::size_t>(id)].empty()) return nullptr;
  return &tokens_[static_cast<std::size_t>(id)];
}

void BpeModel::initialSymbols(std::string_view word, std::vector<Symbol>& symbols) const {
  const auto add = [&](std::int32_t id, std::size_t length) {
    const auto at = static_cast<std::int32_t>(symbols.size());
    symbols.push_back({id, at - 1, at + 1, static_cast<std::uint32_t>(length)});
  };
  if (options_.byte_level) {
    for (unsigned char b : word)
      if (byte_ids_[b] >= 0) add(byte_ids_[b], 1);
  } else {
    // As the crate's merge_word: a pending unknown token is flushed by the
    // next known character (not by byte-fallback tokens), and fused with
    // the next unknown one when fuse_unk.
    std::optional<std::pair<std::int32_t, std::size_t>> unk;
    for (std::size_t at = 0; at < word.size();) {
      const auto cp = decodeAt(word, at);
      const std::size_t length = cp ? cp->length : 1;
      const auto known = cp ? char_ids_.find(cp->value) : char_ids_.end();
      if (known != char_ids_.end()) {
        if (unk) add(unk->first, unk->second), unk.reset();
        add(known->second, length);
      } else if (options_.byte_fallback && std::all_of(word.begin() + at, word.begin() + at + length, [&](char c) {
                   return fallback_ids_[static_cast<unsigned char>(c)] >= 0;
                 })) {
        for (std::size_t i = at; i < at + length; ++i) add(fallback_ids_[static_cast<unsigned char>(word[i])], 1);
      } else if (unk_id_) {
        if (unk && options_.fuse_unk) {
          unk->second += length;
        } else {
          if (unk) add(unk->first, unk->second);
          unk = {*unk_id_, length};
        }
      }
      at += length;
    }
    if (unk) add(unk->first, unk->second);
  }
  if (!symbols.empty()) symbols.back().next = -1;
}

// The crate's Word::merge_all without dropout: a queue of candidate merges
// by (rank, position); a popped merge whose pair has changed is stale.
void BpeModel::mergeAll(std::vector<Symbol>& symbols) const {
  struct Candidate {
    std::int32_t rank, pos, merged;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  thread_local std::vector<Candidate> heap;  // a min-heap by std::greater
  heap.clear();
  const auto consider = [&](std::int32_t pos) {
    if (pos < 0 || symbols[pos].next < 0) return;
    if (const auto* m = merges_->find(symbols[pos].id, symbols[symbols[pos].next].id)) {
      heap.push_back({m->rank, pos, m->merged});
      std::push_heap(heap.begin(), heap.end(), std::greater<>{});
    }
  };
  for (std::int32_t i = 0; i + 1 < static_cast<std::int32_t>(symbols.size()); ++i) consider(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.pos];
    if (left.length == 0 || left.next < 0) continue;
    const auto* m = merges_->find(left.id, symbols[left.next].id);
    if (m == nullptr || m->merged != top.merged) continue;
    Symbol& right = symbols[left.next];
    left.id = top.merged;
    left.length += right.length;
    left.next = right.next;
    right.length = 0;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    consider(left.prev);
    consider(top.pos);
  }
}

void BpeModel::encodeWord(std::string_view word, std::vector<std::int64_t>& out) const {
  if (word.empty()) return;
  const bool cacheable = word.size() < kMaxCachedWord;
  if (cacheable) {
    std::shared_lock lock(cache_mutex_);
    if (const auto it = cache_.find(word); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  thread_local std::vector<std::int32_t> ids;
  ids.clear();
  std::optional<std::int32_t> whole;
  if (options_.ignore_merges) {
    if (options_.byte_level) {
      thread_local std::string mapped;
      mapped.clear();
      for (unsigned char b : word) mapped += byteToUtf8(b);
      whole = tokenId(mapped);
    } else {
      whole = tokenId(word);
    }
  }
  if (whole) {
    ids.push_back(*whole);
  } else {
    thread_local std::vector<Symbol> symbols;
    symbols.clear();
    initialSymbols(word, symbols);
    mergeAll(symbols);
    for (const Symbol& s : symbols)
      if (s.length > 0) ids.push_back(s.id);
  }
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::unique_lock lock(cache_mutex_);
    if (cache_.size() < kMaxCacheEntries) cache_.emplace(std::string(word), ids);
  }
}

}  // namespace hpu::core::data::detail
