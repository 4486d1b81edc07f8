#include "tokenizers/hf_files.h"

#include "hpu/core/base/file_io.h"

namespace hpu::core::data::detail {

using nlohmann::ordered_json;

void writeTokenizerFiles(const std::filesystem::path& dir, const std::string& tokenizer_json,
                         const std::string& tokenizer_config_json, const std::string& special_tokens_map_json) {
  writeFileAtomically((dir / "tokenizer.json").string(), tokenizer_json);
  writeFileAtomically((dir / "tokenizer_config.json").string(), tokenizer_config_json);
  writeFileAtomically((dir / "special_tokens_map.json").string(), special_tokens_map_json);
}

std::string mergelessBpeJson(const std::vector<std::string>& vocab, const ordered_json& pre_tokenizer,
                             const ordered_json& decoder) {
  ordered_json ids = ordered_json::object();
  for (std::size_t i = 0; i < vocab.size(); ++i) ids[vocab[i]] = i;
  ordered_json model = {{"type", "BPE"},
                        {"dropout", nullptr},
                        {"unk_token", nullptr},
                        {"continuing_subword_prefix", nullptr},
                        {"end_of_word_suffix", nullptr},
                        {"fuse_unk", false},
                        {"byte_fallback", false},
                        {"ignore_merges", false},
                        {"vocab", std::move(ids)},
                        {"merges", ordered_json::array()}};
  const ordered_json json = {{"version", "1.0"},
                             {"truncation", nullptr},
                             {"padding", nullptr},
                             {"added_tokens", ordered_json::array()},
                             {"normalizer", nullptr},
                             {"pre_tokenizer", pre_tokenizer},
                             {"post_processor", nullptr},
                             {"decoder", decoder},
                             {"model", std::move(model)}};
  return json.dump(2) + "\n";
}

std::string plainTokenizerConfigJson() {
  const ordered_json json = {{"added_tokens_decoder", ordered_json::object()},
                             {"clean_up_tokenization_spaces", false},
                             {"tokenizer_class", "PreTrainedTokenizerFast"}};
  return json.dump(2) + "\n";
}

}  // namespace hpu::core::data::detail
