#include "hpu/core/data/tokenizer.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <map>
#include <optional>

#include "hpu/core/base/errors.h"
#include "tokenizers/byte_level.h"
#include "tokenizers/hf_files.h"
#include "tokenizers/utf8.h"

namespace hpu::core::data {
namespace {

class ByteTokenizer final : public Tokenizer {
 public:
  std::string name() const override { return "byte"; }
  std::int64_t vocabSize() const override { return 256; }
  std::vector<std::int64_t> encode(std::string_view text, const std::string&) const override {
    std::vector<std::int64_t> ids(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
    return ids;
  }
  std::string decode(const std::vector<std::int64_t>& ids) const override {
    std::string text;
    for (std::int64_t id : ids) text += static_cast<char>(id);
    return text;
  }
  bool byteLevel() const override { return true; }
  // A BPE without merges over GPT-2's byte characters (token b is byte b's),
  // the ByteLevel pre-tokenizer without its regex, the ByteLevel decoder.
  void save(const std::filesystem::path& dir) const override {
    std::vector<std::string> vocab;
    for (int b = 0; b < 256; ++b) vocab.push_back(detail::byteToUtf8(static_cast<std::uint8_t>(b)));
    const nlohmann::ordered_json byte_level = {
        {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}};
    detail::writeTokenizerFiles(dir, detail::mergelessBpeJson(vocab, byte_level, byte_level),
                                detail::plainTokenizerConfigJson(), "{}\n");
  }
};

std::vector<char32_t> codePoints(std::string_view text, const std::string& origin) {
  std::vector<char32_t> out;
  for (std::size_t at = 0; at < text.size();) {
    const auto cp = detail::decodeAt(text, at);
    if (!cp)
      throw DataError(
          fmt::format("{}: byte {} (0x{:02x}) at offset {} is not valid UTF-8; tokenizer char needs UTF-8 "
                      "text (tokenizer byte takes any bytes)",
                      origin, at, static_cast<unsigned char>(text[at]), at));
    out.push_back(cp->value);
    at += cp->length;
  }
  return out;
}

class CharTokenizer final : public Tokenizer {
 public:
  explicit CharTokenizer(std::vector<char32_t> alphabet) : alphabet_(std::move(alphabet)) {
    for (std::size_t i = 0; i < alphabet_.size(); ++i) ids_[alphabet_[i]] = static_cast<std::int64_t>(i);
  }
  std::string name() const override { return "char"; }
  std::int64_t vocabSize() const override { return static_cast<std::int64_t>(alphabet_.size()); }
  std::vector<std::int64_t> encode(std::string_view text, const std::string& origin) const override {
    std::vector<std::int64_t> ids;
    for (char32_t cp : codePoints(text, origin)) {
      const auto it = ids_.find(cp);
      if (it == ids_.end())
        throw DataError(fmt::format("{}: the character U+{:04X} is not in the corpus the char tokenizer was built from",
                                    origin, static_cast<std::uint32_t>(cp)));
      ids.push_back(it->second);
    }
    return ids;
  }
  std::string decode(const std::vector<std::int64_t>& ids) const override {
    std::string text;
    for (std::int64_t id : ids) detail::appendUtf8(text, alphabet_.at(static_cast<std::size_t>(id)));
    return text;
  }
  // A BPE without merges over the characters, no pre-tokenizer, the Fuse
  // decoder (tokens concatenated, as decode does).
  void save(const std::filesystem::path& dir) const override {
    std::vector<std::string> vocab;
    for (char32_t c : alphabet_) vocab.push_back(detail::encodeUtf8(c));
    detail::writeTokenizerFiles(dir, detail::mergelessBpeJson(vocab, nullptr, {{"type", "Fuse"}}),
                                detail::plainTokenizerConfigJson(), "{}\n");
  }

 private:
  std::vector<char32_t> alphabet_;
  std::map<char32_t, std::int64_t> ids_;
};

}  // namespace

const TokenizerSettings& Tokenizer::settings() const {
  static const TokenizerSettings kNone;
  return kNone;
}

std::unique_ptr<Tokenizer> makeByteTokenizer() { return std::make_unique<ByteTokenizer>(); }

std::unique_ptr<Tokenizer> makeCharTokenizer(std::string_view corpus, const std::string& origin) {
  std::vector<char32_t> alphabet = codePoints(corpus, origin);
  std::sort(alphabet.begin(), alphabet.end());
  alphabet.erase(std::unique(alphabet.begin(), alphabet.end()), alphabet.end());
  return std::make_unique<CharTokenizer>(std::move(alphabet));
}

}  // namespace hpu::core::data
