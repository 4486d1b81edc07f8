// loadTokenizer: a Hugging Face tokenizer from a model directory or a
// tokenizer.json, with tokenizer_config.json and special_tokens_map.json
// (special tokens, add_bos_token / add_eos_token, the chat template); and
// GPT-2's original vocab.json + merges.txt.
#include <spdlog/fmt/fmt.h>

#include <filesystem>
#include <sstream>

#include "hpu/core/base/errors.h"
#include "hpu/core/base/file_io.h"
#include "tokenizers/json_file.h"
#include "tokenizers/pretrained_tokenizer.h"

namespace hpu::core::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

std::string readText(const fs::path& file) {
  try {
    return readFile(file.string());
  } catch (const Error& e) {
    throw DataError(fmt::format("{}: cannot read the tokenizer file: {}", file.string(), e.what()));
  }
}

// tokenizer.json of GPT-2's vocab.json + merges.txt, as transformers converts
// them; the special tokens the config names become added tokens.
std::string gpt2TokenizerJson(const fs::path& dir, const std::vector<std::string>& special) {
  const fs::path vocab_file = dir / "vocab.json", merges_file = dir / "merges.txt";
  const ordered_json vocab = ordered_json::parse(readText(vocab_file), nullptr, false);
  if (vocab.is_discarded() || !vocab.is_object())
    throw DataError(fmt::format("{}: not a JSON object of token: id", vocab_file.string()));
  ordered_json merges = ordered_json::array();
  std::istringstream lines(readText(merges_file));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.starts_with("#version")) continue;
    merges.push_back(line);
  }
  ordered_json added = ordered_json::array();
  for (const std::string& token : special) {
    if (token.empty() || !vocab.contains(token)) continue;
    bool seen = false;
    for (const auto& a : added) seen = seen || a["content"] == token;
    if (seen) continue;
    added.push_back({{"id", vocab[token]}, {"content", token}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", true}, {"special", true}});
  }
  const ordered_json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  const ordered_json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", byte_level},
      {"post_processor", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}}},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab},
        {"merges", merges}}}};
  return tokenizer.dump(2) + "\n";
}

// A special token's text in tokenizer_config.json: a string or an
// AddedToken object ({"content": ...}); "" when absent or null.
std::string specialTokenText(const json& config, const char* name) {
  const auto it = config.find(name);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return "";
}

}  // namespace

std::unique_ptr<Tokenizer> loadTokenizer(const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status))
    throw DataError(fmt::format("{}: does not exist; give a Hugging Face model directory (with tokenizer.json, or "
                                "vocab.json and merges.txt) or a tokenizer.json file",
                                path.string()));
  const bool is_dir = fs::is_directory(status);
  const fs::path dir = is_dir ? path : path.parent_path();
  fs::path tokenizer_json = is_dir ? path / "tokenizer.json" : path;
  const bool gpt2_pair = is_dir && !fs::exists(tokenizer_json) && fs::exists(dir / "vocab.json") && fs::exists(dir / "merges.txt");
  if (is_dir && !fs::exists(tokenizer_json) && !gpt2_pair)
    throw DataError(fmt::format("{}: has no tokenizer.json, nor GPT-2's vocab.json and merges.txt; give the directory "
                                "of a Hugging Face model or its tokenizer.json",
                                path.string()));

  // The side files: read when present, written back by save().
  std::map<std::string, std::string> files;
  json config = json::object(), special_map = json::object();
  for (const char* name : {"tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"}) {
    const fs::path file = dir / name;
    if (!fs::is_regular_file(file)) continue;
    files[name] = readText(file);
    if (std::string(name) == "tokenizer_config.json") config = detail::parseJson(files[name], file.string());
    if (std::string(name) == "special_tokens_map.json") special_map = detail::parseJson(files[name], file.string());
  }
  if (!config.is_object()) throw DataError(fmt::format("{}: must be a JSON object", (dir / "tokenizer_config.json").string()));
  if (!special_map.is_object()) special_map = json::object();

  TokenizerSettings settings;
  std::string* const texts[] = {&settings.bos_token, &settings.eos_token, &settings.pad_token, &settings.unk_token};
  const char* const names[] = {"bos_token", "eos_token", "pad_token", "unk_token"};
  for (int i = 0; i < 4; ++i) {
    *texts[i] = specialTokenText(config, names[i]);
    if (texts[i]->empty() && !config.contains(names[i])) *texts[i] = specialTokenText(special_map, names[i]);
  }

  std::string text;
  if (gpt2_pair) {
    text = gpt2TokenizerJson(dir, {settings.bos_token, settings.eos_token, settings.unk_token, settings.pad_token,
                                   "<|endoftext|>"});
    files["vocab.json"] = readText(dir / "vocab.json");
    files["merges.txt"] = readText(dir / "merges.txt");
    tokenizer_json = dir / "vocab.json";
  } else {
    text = readText(tokenizer_json);
  }
  detail::TokenizerPipeline pipeline = detail::parseTokenizerJson(text, tokenizer_json.string());
  files["tokenizer.json"] = text;

  // Chat template: chat_template.jinja, else the config's (a string, or a
  // list of named templates, of which "default").
  if (files.contains("chat_template.jinja")) {
    settings.chat_template = files["chat_template.jinja"];
  } else if (const auto it = config.find("chat_template"); it != config.end()) {
    if (it->is_string()) settings.chat_template = it->get<std::string>();
    if (it->is_array())
      for (const json& named : *it)
        if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
            named["template"].is_string())
          settings.chat_template = named["template"].get<std::string>();
  }
  if (!files.contains("tokenizer_config.json")) {
    files["tokenizer_config.json"] =
        ordered_json{{"clean_up_tokenization_spaces", false}, {"tokenizer_class", "PreTrainedTokenizerFast"}}.dump(2) + "\n";
  }
  if (!files.contains("special_tokens_map.json")) {
    ordered_json map = ordered_json::object();
    for (int i = 0; i < 4; ++i)
      if (!texts[i]->empty()) map[names[i]] = *texts[i];
    files["special_tokens_map.json"] = map.dump(2) + "\n";
  }

  std::optional<std::int64_t>* const ids[] = {&settings.bos_id, &settings.eos_id, &settings.pad_id, &settings.unk_id};
  for (int i = 0; i < 4; ++i)
    if (!texts[i]->empty()) *ids[i] = detail::findTokenId(pipeline, *texts[i]);
  // transformers' Llama tokenizers rebuild the template from add_bos_token /
  // add_eos_token: when the config has them, they decide.
  const auto configFlag = [&](const char* key) { return config.contains(key) && config[key].is_boolean() && config[key].get<bool>(); };
  if (config.contains("add_bos_token") || config.contains("add_eos_token")) {
    pipeline.prefix.clear();
    pipeline.suffix.clear();
    if (configFlag("add_bos_token") && settings.bos_id) pipeline.prefix.push_back(*settings.bos_id);
    if (configFlag("add_eos_token") && settings.eos_id) pipeline.suffix.push_back(*settings.eos_id);
  }
  pipeline.clean_up_spaces = configFlag("clean_up_tokenization_spaces");
  return std::make_unique<detail::PretrainedTokenizer>(tokenizer_json.string(), std::move(pipeline),
                                                       std::move(settings), std::move(files));
}

}  // namespace hpu::core::data
