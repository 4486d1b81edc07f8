// Writing the Hugging Face tokenizer files (tokenizer.json,
// tokenizer_config.json, special_tokens_map.json) of a model directory.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hpu::core::data::detail {

// Writes the three files into `dir` (created if needed), each atomically.
void writeTokenizerFiles(const std::filesystem::path& dir, const std::string& tokenizer_json,
                         const std::string& tokenizer_config_json, const std::string& special_tokens_map_json);

// tokenizer.json of a BPE model without merges whose token i is vocab[i],
// with the given pre-tokenizer and decoder (JSON null for none): every
// character of a word is looked up alone.
std::string mergelessBpeJson(const std::vector<std::string>& vocab, const nlohmann::ordered_json& pre_tokenizer,
                             const nlohmann::ordered_json& decoder);

// tokenizer_config.json of a tokenizer with no special tokens, for
// transformers' PreTrainedTokenizerFast.
std::string plainTokenizerConfigJson();

}  // namespace hpu::core::data::detail
