// A Hugging Face model directory, the one place that reads and writes one:
//   config.json                        the architecture (transformer_config.h reads it)
//   model.safetensors                  the weights, or
//   model.safetensors.index.json       {"weight_map": {tensor: shard file}} and the shards
//   tokenizer.json, tokenizer_config.json, special_tokens_map.json (data/tokenizer.h)
//   generation_config.json             bos/eos/pad ids
// Reading maps the weight files (checkpoint/safetensors_file.h): a tensor's
// bytes are read when copied into a parameter, converted from F32, BF16 or
// F16 on the way. Writing is what transformers' save_pretrained writes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "hpu/core/checkpoint/checkpoint.h"
#include "hpu/core/checkpoint/safetensors_file.h"
#include "hpu/core/models/transformer_config.h"
#include "hpu/core/nn/lora.h"
#include "hpu/core/nn/module.h"

namespace hpu::core::models {

// The weights of a model directory, mapped (or, header_only, their names,
// dtypes and shapes alone: what estimate reads).
class PretrainedWeights {
 public:
  // Throws UsageError naming the directory when it holds neither
  // model.safetensors nor model.safetensors.index.json, and CheckpointError
  // for an unreadable file.
  PretrainedWeights(const std::string& dir, bool header_only = false);

  struct Found {
    const checkpoint::SafetensorsFile* file;
    const checkpoint::SafetensorsTensor* tensor;
  };
  // The tensor stored under `name`; {nullptr, nullptr} when none is.
  Found find(const std::string& name) const;
  // Every stored tensor's name, in file order.
  std::vector<std::string> names() const;
  // Elements [first, first + out.size()) of tensor `name` into `out`.
  // REQUIRES: find(name) finds it, floating, and the range lies inside it.
  void copy(const std::string& name, std::int64_t first, std::span<float> out) const;
  // Bytes of tensor data copied out so far, and stored in all.
  std::uint64_t bytesRead() const { return bytes_read_; }
  std::uint64_t bytesStored() const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::vector<std::shared_ptr<const checkpoint::SafetensorsFile>> files_;
  std::map<std::string, std::size_t> file_of_;  // tensor name -> files_ index
  mutable std::uint64_t bytes_read_ = 0;
};

// What loadPretrainedWeights does with one of the module's tensors.
enum class PretrainedLoad {
  kCopy,       // check its shape and copy its values
  kCheckOnly,  // check its shape; its values are copied later (a partitioned parameter's shard)
  kAbsent,     // not in the files (a LoRA adapter)
};

// Copies `weights` into `module`'s parameters and buffers, each looked up by
// key(name) (a model's checkpoint names: Hugging Face's) and treated as
// how(tensor) says. Tensors transformers leaves out of a checkpoint (rotary
// inv_freq, GPT-2's causal mask buffers) may be absent or present; a tied
// lm_head may be present (transformers ties it anyway); `other_parts` (keys
// of the tensors the model's other pipeline stages hold) are present and
// left alone. Anything else missing from the files, present in them but not
// in the model, or of another shape is listed, all of it, in one UsageError
// naming the directory. Half-precision parameters are rounded to their dtype.
void loadPretrainedWeights(const nn::Module& module, const std::function<std::string(const std::string&)>& key,
                           const std::function<PretrainedLoad(const nn::NamedTensor&)>& how,
                           const PretrainedWeights& weights, const std::set<std::string>& other_parts = {});

// config.json of `c` as transformers 5 writes it for the model's class
// (its keys, dtype `dtype`, rope_parameters, layer_types).
std::string hfConfigJson(const TransformerConfig& c, device::DType dtype);
// generation_config.json: the bos / eos / pad ids that are set.
std::string hfGenerationConfigJson(std::optional<std::int64_t> bos, std::optional<std::int64_t> eos,
                                   std::optional<std::int64_t> pad);

// Writes `tensors` into `dir` as transformers' save_pretrained does: one
// model.safetensors, or, past `max_shard_bytes` (transformers' default 5 GB),
// model-0000i-of-0000n.safetensors shards and model.safetensors.index.json.
// Each file is written atomically, with metadata {"format": "pt"}.
void writePretrainedWeights(const std::string& dir, std::vector<checkpoint::TensorEntry> tensors,
                            std::uint64_t max_shard_bytes = 5'000'000'000ull);

// PEFT's adapter directory: adapter_config.json (a LoraConfig) and
// adapter_model.safetensors, whose tensors are named
// kPeftPrefix + the model's own name (q_proj.lora_A.weight).
inline constexpr const char* kPeftPrefix = "base_model.model.";
std::string peftAdapterConfigJson(const nn::LoraSettings& s, const std::string& base_model, const std::string& model_type);
// The LoraConfig of `dir`/adapter_config.json. Throws UsageError naming the
// file and key for another peft_type or a LoRA variant hpu-train does not
// implement (DoRA, rank_pattern, layers_to_transform, ...).
nn::LoraSettings readPeftAdapterConfig(const std::string& dir);

}  // namespace hpu::core::models
