#include "tokenizers/pretrained_tokenizer.h"

#include <spdlog/fmt/fmt.h>

#include "hpu/core/base/errors.h"
#include "hpu/core/base/file_io.h"
#include "tokenizers/utf8.h"

namespace hpu::core::data::detail {
namespace {

// DataError naming `origin` and the offset of the first byte that is not UTF-8.
void requireUtf8(std::string_view text, const std::string& origin) {
  for (std::size_t at = 0; at < text.size();) {
    if (static_cast<unsigned char>(text[at]) < 0x80) {
      ++at;
      continue;
    }
    const auto cp = decodeAt(text, at);
    if (!cp)
      throw DataError(fmt::format("{}: byte 0x{:02x} at offset {} is not valid UTF-8; a Hugging Face tokenizer reads "
                                  "UTF-8 text (convert the file, e.g. with iconv)",
                                  origin, static_cast<unsigned char>(text[at]), at));
    at += cp->length;
  }
}

}  // namespace

struct PretrainedTokenizer::Scratch {
  std::vector<AddedTokenMatcher::Part> parts;
  std::string normalized;
};

PretrainedTokenizer::PretrainedTokenizer(std::string name, TokenizerPipeline pipeline, TokenizerSettings settings,
                                         std::map<std::string, std::string> files)
    : name_(std::move(name)), p_(std::move(pipeline)), settings_(std::move(settings)), files_(std::move(files)) {
  std::vector<AddedToken> raw, normalized;
  vocab_size_ = p_.model->size();
  for (const AddedToken& token : p_.added_tokens) {
    added_by_id_[token.id] = token.content;
    vocab_size_ = std::max<std::int64_t>(vocab_size_, token.id + 1);
    if (token.normalized) {
      // Found in normalized text, after the others (a pass of its own even
      // without a normalizer, as tokenizers does); its content is normalized too.
      AddedToken copy = token;
      if (!p_.normalizer.empty()) p_.normalizer.apply(token.content, copy.content);
      normalized.push_back(std::move(copy));
    } else {
      raw.push_back(token);
    }
  }
  raw_tokens_ = AddedTokenMatcher(std::move(raw));
  normalized_tokens_ = AddedTokenMatcher(std::move(normalized));
}

std::optional<std::int64_t> findTokenId(const TokenizerPipeline& pipeline, std::string_view token) {
  for (const AddedToken& t : pipeline.added_tokens)
    if (t.content == token) return t.id;
  return pipeline.model->tokenId(token);
}

std::vector<std::int64_t> PretrainedTokenizer::encode(std::string_view text, const std::string& origin) const {
  requireUtf8(text, origin);
  std::vector<std::int64_t> out;
  out.reserve(text.size() / 3 + 16);
  std::vector<AddedTokenMatcher::Part> parts;
  raw_tokens_.split(text, parts);
  Scratch scratch;
  for (const auto& part : parts) {
    if (part.id >= 0)
      out.push_back(part.id);
    else
      encodeRun(text.substr(part.begin, part.end - part.begin), part.begin == 0, out, scratch);
  }
  return out;
}

// A run of text between added tokens: normalized, then split by the
// normalized added tokens, pre-tokenized and encoded word by word.
void PretrainedTokenizer::encodeRun(std::string_view text, bool first, std::vector<std::int64_t>& out,
                                    Scratch& scratch) const {
  if (!p_.normalizer.empty()) {
    p_.normalizer.apply(text, scratch.normalized);
    text = scratch.normalized;
  }
  const auto encodeWords = [&](std::string_view run, bool starts_input) {
    p_.pre_tokenizer.apply(run, starts_input, [&](std::string_view word) { p_.model->encodeWord(word, out); });
  };
  if (normalized_tokens_.empty()) return encodeWords(text, first);
  scratch.parts.clear();
  normalized_tokens_.split(text, scratch.parts);
  for (const auto& part : scratch.parts) {
    if (part.id >= 0)
      out.push_back(part.id);
    else
      encodeWords(text.substr(part.begin, part.end - part.begin), first && part.begin == 0);
  }
}

std::vector<std::int64_t> PretrainedTokenizer::encodeWithSpecialTokens(std::string_view text,
                                                                        const std::string& origin) const {
  std::vector<std::int64_t> ids = encode(text, origin);
  ids.insert(ids.begin(), p_.prefix.begin(), p_.prefix.end());
  ids.insert(ids.end(), p_.suffix.begin(), p_.suffix.end());
  return ids;
}

std::string PretrainedTokenizer::decode(const std::vector<std::int64_t>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (std::int64_t id : ids) {
    if (const auto it = added_by_id_.find(id); it != added_by_id_.end())
      tokens.push_back(it->second);
    else if (const std::string* token = p_.model->token(id))
      tokens.push_back(*token);
  }
  std::string text = p_.decoder.decode(std::move(tokens));
  if (!p_.clean_up_spaces) return text;
  // transformers' clean_up_tokenization, its replacements in its order.
  static constexpr std::pair<std::string_view, std::string_view> kCleanUps[] = {
      {" .", "."},     {" ?", "?"},     {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  std::string cleaned;
  for (const auto& [from, to] : kCleanUps) {
    replaceAll(text, from, to, cleaned);
    text.swap(cleaned);
  }
  return text;
}

void PretrainedTokenizer::save(const std::filesystem::path& dir) const {
  for (const auto& [file, bytes] : files_) writeFileAtomically((dir / file).string(), bytes);
}

}  // namespace hpu::core::data::detail
