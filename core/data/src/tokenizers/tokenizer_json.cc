// tokenizer.json (Hugging Face tokenizers' serialization) to a pipeline.
// What the supported models use is read; anything else is refused by name
// with the key that holds it, rather than encoded differently.
#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "hpu/core/base/errors.h"
#include "tokenizers/json_file.h"
#include "tokenizers/pretrained_tokenizer.h"

namespace hpu::core::data::detail {
namespace {

using nlohmann::json;

class Reader {
 public:
  explicit Reader(const std::string& origin) : origin_(origin) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw DataError(fmt::format("{}: {}: {}", origin_, key, what));
  }
  const json& field(const json& object, const std::string& key, const std::string& name) const {
    if (!object.is_object()) fail(key, "must be a JSON object");
    const auto it = object.find(name);
    if (it == object.end()) fail(key + "." + name, "missing");
    return *it;
  }
  const json& list(const json& object, const std::string& key, const std::string& name) const {
    const json& v = field(object, key, name);
    if (!v.is_array()) fail(key + "." + name, "must be a list");
    return v;
  }
  std::string string(const json& object, const std::string& key, const std::string& name) const {
    const json& v = field(object, key, name);
    if (!v.is_string()) fail(key + "." + name, "must be a string");
    return v.get<std::string>();
  }
  bool flag(const json& object, const std::string& key, const std::string& name, bool fallback) const {
    const auto it = object.find(name);
    if (it == object.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) fail(key + "." + name, "must be true or false");
    return it->get<bool>();
  }
  std::int64_t integer(const json& v, const std::string& key) const {
    if (!v.is_number_integer()) fail(key, "must be an integer");
    return v.get<std::int64_t>();
  }
  std::string type(const json& object, const std::string& key) const { return string(object, key, "type"); }
  [[noreturn]] void unsupported(const std::string& key, const std::string& type, const std::string& supported) const {
    fail(key + ".type", fmt::format("{} is not supported; hpu-train reads {}", type, supported));
  }
  // A Replace's {"String": s} pattern (a regex is refused).
  std::string stringPattern(const json& object, const std::string& key) const {
    const json& pattern = field(object, key, "pattern");
    if (pattern.contains("Regex")) fail(key + ".pattern.Regex", "a regex pattern is not supported here; hpu-train reads String patterns");
    return string(pattern, key + ".pattern", "String");
  }

 private:
  const std::string& origin_;
};

std::vector<AddedToken> readAddedTokens(const Reader& r, const json& list) {
  std::vector<AddedToken> tokens;
  if (list.is_null()) return tokens;
  if (!list.is_array()) r.fail("added_tokens", "must be a list");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string key = fmt::format("added_tokens[{}]", i);
    const json& t = list[i];
    AddedToken token;
    token.id = static_cast<std::int32_t>(r.integer(r.field(t, key, "id"), key + ".id"));
    token.content = r.string(t, key, "content");
    if (token.content.empty()) r.fail(key + ".content", "must not be empty");
    token.single_word = r.flag(t, key, "single_word", false);
    token.lstrip = r.flag(t, key, "lstrip", false);
    token.rstrip = r.flag(t, key, "rstrip", false);
    token.special = r.flag(t, key, "special", false);
    token.normalized = r.flag(t, key, "normalized", !token.special);
    tokens.push_back(std::move(token));
  }
  return tokens;
}

void readNormalizer(const Reader& r, const json& j, const std::string& key, std::vector<NormalizerStep>& steps) {
  if (j.is_null()) return;
  const std::string type = r.type(j, key);
  if (type == "Sequence") {
    const json& list = r.list(j, key, "normalizers");
    for (std::size_t i = 0; i < list.size(); ++i)
      readNormalizer(r, list[i], fmt::format("{}.normalizers[{}]", key, i), steps);
  } else if (type == "Prepend") {
    steps.push_back({NormalizerStep::Kind::kPrepend, "", r.string(j, key, "prepend")});
  } else if (type == "Replace") {
    std::string pattern = r.stringPattern(j, key);
    if (pattern.empty()) r.fail(key + ".pattern.String", "must not be empty");
    steps.push_back({NormalizerStep::Kind::kReplace, std::move(pattern), r.string(j, key, "content")});
  } else if (type == "NFC") {
    steps.push_back({NormalizerStep::Kind::kNfc});
  } else if (type == "NFD") {
    steps.push_back({NormalizerStep::Kind::kNfd});
  } else {
    r.unsupported(key, type, "the normalizers NFC, NFD, Prepend, Replace (String pattern) and Sequence");
  }
}

// Appends the steps of one pre-tokenizer; `byte_level` is set by ByteLevel,
// after which nothing may come (the model maps the words to bytes).
void readPreTokenizer(const Reader& r, const json& j, const std::string& key, std::vector<PreTokenizerStep>& steps,
                      bool& byte_level) {
  if (j.is_null()) return;
  const std::string type = r.type(j, key);
  if (byte_level && type != "Sequence")
    r.fail(key, fmt::format("a {} after ByteLevel is not supported (ByteLevel must be the last pre-tokenizer)", type));
  using Kind = PreTokenizerStep::Kind;
  if (type == "Sequence") {
    const json& list = r.list(j, key, "pretokenizers");
    for (std::size_t i = 0; i < list.size(); ++i)
      readPreTokenizer(r, list[i], fmt::format("{}.pretokenizers[{}]", key, i), steps, byte_level);
  } else if (type == "ByteLevel") {
    byte_level = true;
    PreTokenizerStep step{Kind::kByteLevel};
    step.add_prefix_space = r.flag(j, key, "add_prefix_space", true);
    steps.push_back(std::move(step));
    if (r.flag(j, key, "use_regex", true)) {
      PreTokenizerStep split{Kind::kSplit};
      split.pattern = SplitPattern::kGpt2;
      steps.push_back(std::move(split));
    }
  } else if (type == "Split") {
    PreTokenizerStep step{Kind::kSplit};
    const json& pattern = r.field(j, key, "pattern");
    if (pattern.is_object() && pattern.contains("String")) {
      step.literal = r.string(pattern, key + ".pattern", "String");
    } else if (pattern.is_object() && pattern.contains("Regex")) {
      const std::string regex = r.string(pattern, key + ".pattern", "Regex");
      step.pattern = findSplitPattern(regex);
      if (!step.pattern)
        r.fail(key + ".pattern.Regex", fmt::format("the regex {} is not supported; hpu-train reads GPT-2's, Llama 3's "
                                                   "and Qwen2's",
                                                   json(regex).dump()));
    } else {
      r.fail(key + ".pattern", "must be {\"String\": ...} or {\"Regex\": ...}");
    }
    static const std::pair<const char*, SplitBehavior> kBehaviors[] = {
        {"Removed", SplitBehavior::kRemoved},
        {"Isolated", SplitBehavior::kIsolated},
        {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
        {"MergedWithNext", SplitBehavior::kMergedWithNext},
        {"Contiguous", SplitBehavior::kContiguous}};
    const std::string behavior = r.string(j, key, "behavior");
    const auto* found = std::find_if(std::begin(kBehaviors), std::end(kBehaviors),
                                     [&](const auto& b) { return behavior == b.first; });
    if (found == std::end(kBehaviors))
      r.fail(key + ".behavior", fmt::format("{} is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, "
                                            "Contiguous",
                                            behavior));
    step.behavior = found->second;
    step.invert = r.flag(j, key, "invert", false);
    steps.push_back(std::move(step));
  } else if (type == "Metaspace") {
    PreTokenizerStep step{Kind::kMetaspace};
    step.replacement = r.string(j, key, "replacement");
    step.split = r.flag(j, key, "split", true);
    using Prepend = PreTokenizerStep::Prepend;
    if (j.contains("prepend_scheme")) {
      const std::string scheme = r.string(j, key, "prepend_scheme");
      if (scheme == "always") step.prepend = Prepend::kAlways;
      else if (scheme == "first") step.prepend = Prepend::kFirst;
      else if (scheme == "never") step.prepend = Prepend::kNever;
      else r.fail(key + ".prepend_scheme", fmt::format("{} is not one of always, first, never", scheme));
    } else {
      step.prepend = r.flag(j, key, "add_prefix_space", true) ? Prepend::kAlways : Prepend::kNever;
    }
    steps.push_back(std::move(step));
  } else {
    r.unsupported(key, type,
                  "the pre-tokenizers ByteLevel, Split (a string, or GPT-2's, Llama 3's or Qwen2's regex), Metaspace "
                  "and Sequence");
  }
}

void readDecoder(const Reader& r, const json& j, const std::string& key, std::vector<DecoderStep>& steps) {
  const std::string type = r.type(j, key);
  using Kind = DecoderStep::Kind;
  if (type == "Sequence") {
    const json& list = r.list(j, key, "decoders");
    for (std::size_t i = 0; i < list.size(); ++i) readDecoder(r, list[i], fmt::format("{}.decoders[{}]", key, i), steps);
  } else if (type == "ByteLevel") {
    steps.push_back({Kind::kByteLevel});
  } else if (type == "ByteFallback") {
    steps.push_back({Kind::kByteFallback});
  } else if (type == "Fuse") {
    steps.push_back({Kind::kFuse});
  } else if (type == "Replace") {
    steps.push_back({Kind::kReplace, r.stringPattern(j, key), r.string(j, key, "content")});
  } else if (type == "Strip") {
    DecoderStep step{Kind::kStrip, "", r.string(j, key, "content")};
    step.start = static_cast<std::size_t>(r.integer(r.field(j, key, "start"), key + ".start"));
    step.stop = static_cast<std::size_t>(r.integer(r.field(j, key, "stop"), key + ".stop"));
    steps.push_back(std::move(step));
  } else if (type == "Metaspace") {
    DecoderStep step{Kind::kMetaspace, r.string(j, key, "replacement")};
    step.prepend = j.contains("prepend_scheme") ? r.string(j, key, "prepend_scheme") != "never"
                                                : r.flag(j, key, "add_prefix_space", true);
    steps.push_back(std::move(step));
  } else {
    r.unsupported(key, type, "the decoders ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip and Sequence");
  }
}

// The single-sequence template of a post-processor, into prefix / suffix.
void readPostProcessor(const Reader& r, const json& j, const std::string& key, TokenizerPipeline& p) {
  if (j.is_null()) return;
  const std::string type = r.type(j, key);
  if (type == "Sequence") {
    const json& list = r.list(j, key, "processors");
    for (std::size_t i = 0; i < list.size(); ++i) readPostProcessor(r, list[i], fmt::format("{}.processors[{}]", key, i), p);
  } else if (type == "ByteLevel") {
    // Adjusts offsets only.
  } else if (type == "TemplateProcessing") {
    const json& single = r.list(j, key, "single");
    const json& special = r.field(j, key, "special_tokens");
    bool seen_sequence = false;
    for (std::size_t i = 0; i < single.size(); ++i) {
      const std::string item = fmt::format("{}.single[{}]", key, i);
      if (single[i].contains("Sequence")) {
        seen_sequence = true;
        continue;
      }
      const std::string name = r.string(r.field(single[i], item, "SpecialToken"), item + ".SpecialToken", "id");
      const json& entry = r.field(special, key + ".special_tokens", name);
      for (const json& id : r.list(entry, key + ".special_tokens." + name, "ids"))
        (seen_sequence ? p.suffix : p.prefix).push_back(r.integer(id, key + ".special_tokens." + name + ".ids"));
    }
  } else {
    r.unsupported(key, type, "the post-processors TemplateProcessing, ByteLevel and Sequence");
  }
}

std::unique_ptr<BpeModel> readModel(const Reader& r, const json& j, bool byte_level) {
  const std::string key = "model";
  if (!j.is_object()) r.fail(key, "must be a JSON object");
  const std::string type = j.contains("type") ? r.type(j, key) : "BPE";
  if (type != "BPE") r.unsupported(key, type, "BPE models (WordPiece, Unigram and WordLevel are not implemented)");
  if (j.contains("dropout") && !j["dropout"].is_null() && j["dropout"] != 0.0)
    r.fail("model.dropout", "BPE dropout is not supported (it makes encoding random); set it to null");
  for (const char* name : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (j.contains(name) && !j[name].is_null() && !(j[name].is_string() && j[name].get<std::string>().empty()))
      r.fail(std::string("model.") + name, "a non-empty affix is not supported (the supported models have none)");
  BpeOptions options;
  if (j.contains("unk_token") && !j["unk_token"].is_null()) options.unk_token = r.string(j, key, "unk_token");
  options.fuse_unk = r.flag(j, key, "fuse_unk", false);
  options.byte_fallback = r.flag(j, key, "byte_fallback", false);
  options.ignore_merges = r.flag(j, key, "ignore_merges", false);
  options.byte_level = byte_level;
  const json& vocab_json = r.field(j, key, "vocab");
  if (!vocab_json.is_object()) r.fail("model.vocab", "must be an object of token: id");
  TokenIds vocab;
  vocab.reserve(vocab_json.size());
  for (const auto& [token, id] : vocab_json.items()) {
    const std::int64_t value = r.integer(id, "model.vocab");
    if (value < 0 || value > INT32_MAX) r.fail("model.vocab", fmt::format("the id {} of {} is out of range", value, json(token).dump()));
    vocab.emplace(token, static_cast<std::int32_t>(value));
  }
  std::vector<std::pair<std::string, std::string>> merges;
  const json& merges_json = r.list(j, key, "merges");
  merges.reserve(merges_json.size());
  for (std::size_t i = 0; i < merges_json.size(); ++i) {
    const json& m = merges_json[i];
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const std::size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        r.fail(fmt::format("model.merges[{}]", i), fmt::format("{} is not two tokens separated by a space", m.dump()));
      merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      r.fail(fmt::format("model.merges[{}]", i), "must be \"a b\" or [\"a\", \"b\"]");
    }
  }
  try {
    return std::make_unique<BpeModel>(std::move(vocab), merges, std::move(options));
  } catch (const std::invalid_argument& e) {
    r.fail("model", e.what());
  }
}

TokenizerPipeline readPipeline(const std::string& json_text, const std::string& origin) {
  const Reader r(origin);
  const json j = parseJson(json_text, origin);
  if (!j.is_object()) r.fail("(top level)", "must be a JSON object");
  TokenizerPipeline p;
  p.added_tokens = readAddedTokens(r, j.value("added_tokens", json()));
  std::vector<NormalizerStep> normalizer;
  readNormalizer(r, j.value("normalizer", json()), "normalizer", normalizer);
  p.normalizer = Normalizer(std::move(normalizer));
  bool byte_level = false;
  std::vector<PreTokenizerStep> pre_tokenizer;
  readPreTokenizer(r, j.value("pre_tokenizer", json()), "pre_tokenizer", pre_tokenizer, byte_level);
  p.pre_tokenizer = PreTokenizer(std::move(pre_tokenizer));
  p.model = readModel(r, r.field(j, "(top level)", "model"), byte_level);
  readPostProcessor(r, j.value("post_processor", json()), "post_processor", p);
  if (const json decoder = j.value("decoder", json()); !decoder.is_null()) {
    std::vector<DecoderStep> steps;
    readDecoder(r, decoder, "decoder", steps);
    p.decoder = Decoder(std::move(steps));
  }
  return p;
}

}  // namespace

TokenizerPipeline parseTokenizerJson(const std::string& json_text, const std::string& origin) {
  try {
    return readPipeline(json_text, origin);
  } catch (const json::exception& e) {  // a value of an unexpected type the readers did not check
    throw DataError(fmt::format("{}: not a tokenizer.json of the expected shape ({})", origin, e.what()));
  }
}

}  // namespace hpu::core::data::detail
