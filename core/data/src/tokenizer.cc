#include "hpu/core/data/tokenizer.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <map>
#include <optional>

#include "hpu/core/base/errors.h"

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
};

// The code point of the UTF-8 sequence at text[at] and its length, or
// nullopt for an invalid one (bad lead or continuation byte, overlong form,
// surrogate, beyond U+10FFFF, truncated).
struct CodePoint {
  char32_t value;
  std::size_t length;
};
std::optional<CodePoint> decodeAt(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[at + i]); };
  const unsigned char lead = byte(0);
  std::size_t n;
  char32_t cp;
  if (lead < 0x80) return CodePoint{lead, 1};
  if ((lead & 0xE0) == 0xC0)
    n = 2, cp = lead & 0x1F;
  else if ((lead & 0xF0) == 0xE0)
    n = 3, cp = lead & 0x0F;
  else if ((lead & 0xF8) == 0xF0)
    n = 4, cp = lead & 0x07;
  else
    return std::nullopt;
  if (at + n > text.size()) return std::nullopt;
  for (std::size_t i = 1; i < n; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return std::nullopt;
    cp = (cp << 6) | (byte(i) & 0x3F);
  }
  static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;
  return CodePoint{cp, n};
}

std::vector<char32_t> codePoints(std::string_view text, const std::string& origin) {
  std::vector<char32_t> out;
  for (std::size_t at = 0; at < text.size();) {
    const auto cp = decodeAt(text, at);
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

std::string encodeUtf8(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
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
    for (std::int64_t id : ids) text += encodeUtf8(alphabet_.at(static_cast<std::size_t>(id)));
    return text;
  }

 private:
  std::vector<char32_t> alphabet_;
  std::map<char32_t, std::int64_t> ids_;
};

}  // namespace

std::unique_ptr<Tokenizer> makeByteTokenizer() { return std::make_unique<ByteTokenizer>(); }

std::unique_ptr<Tokenizer> makeCharTokenizer(std::string_view corpus, const std::string& origin) {
  std::vector<char32_t> alphabet = codePoints(corpus, origin);
  std::sort(alphabet.begin(), alphabet.end());
  alphabet.erase(std::unique(alphabet.begin(), alphabet.end()), alphabet.end());
  return std::make_unique<CharTokenizer>(std::move(alphabet));
}

}  // namespace hpu::core::data
