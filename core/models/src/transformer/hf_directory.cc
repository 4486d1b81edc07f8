#include "hpu/core/models/hf_directory.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "hpu/core/base/errors.h"
#include "hpu/core/base/file_io.h"
#include "hpu/device/check.h"
#include "hpu/device/numerics.h"

namespace hpu::core::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kWeights = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";

// Buffers transformers neither saves nor expects: rotary frequencies and
// GPT-2's causal mask (its _keys_to_ignore_on_load_*).
bool notSavedByTransformers(const std::string& name) {
  for (const char* suffix : {"rotary_emb.inv_freq", ".attn.bias", ".attn.masked_bias"})
    if (name.ends_with(suffix)) return true;
  return false;
}

std::string shapeText(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::string torchDtype(device::DType dtype) {
  switch (dtype) {
    case device::DType::kBFloat16: return "bfloat16";
    case device::DType::kFloat16: return "float16";
    default: return "float32";
  }
}

}  // namespace

PretrainedWeights::PretrainedWeights(const std::string& dir, bool header_only) : dir_(dir) {
  const fs::path root(dir);
  if (!fs::is_directory(root))
    throw UsageError(fmt::format("model.init_args.pretrained: {} is not a directory (a Hugging Face model directory "
                                 "with config.json and model.safetensors)",
                                 dir));
  std::vector<std::string> shards;
  std::map<std::string, std::string> shard_of;
  if (fs::exists(root / kIndex)) {
    const std::string index_path = (root / kIndex).string();
    const json index = json::parse(readFile(index_path), nullptr, false);
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      throw UsageError(index_path + ": not a safetensors index (a JSON object with a \"weight_map\" object)");
    for (const auto& [tensor, file] : index["weight_map"].items()) {
      if (!file.is_string()) throw UsageError(fmt::format("{}: weight_map.{} is not a file name", index_path, tensor));
      const std::string name = file.get<std::string>();
      if (name.find('/') != std::string::npos)
        throw UsageError(fmt::format("{}: weight_map.{}: '{}' is not a file of the directory", index_path, tensor, name));
      shard_of[tensor] = name;
      if (std::find(shards.begin(), shards.end(), name) == shards.end()) shards.push_back(name);
    }
  } else if (fs::exists(root / kWeights)) {
    shards.push_back(kWeights);
  } else {
    throw UsageError(fmt::format("{} has neither {} nor {}: hpu-train reads safetensors weights (save them with "
                                 "save_pretrained(..., safe_serialization=True))",
                                 dir, kWeights, kIndex));
  }
  for (const std::string& shard : shards) {
    files_.push_back(checkpoint::SafetensorsFile::open((root / shard).string(), header_only));
    for (const auto& t : files_.back()->tensors()) {
      const auto it = shard_of.find(t.name);
      if (!shard_of.empty() && (it == shard_of.end() || it->second != shard))
        throw UsageError(fmt::format("{}: tensor '{}' is in {} but {} does not map it there", dir, t.name, shard, kIndex));
      file_of_[t.name] = files_.size() - 1;
    }
  }
  for (const auto& [tensor, shard] : shard_of)
    if (!file_of_.count(tensor))
      throw UsageError(fmt::format("{}: {} maps '{}' to {}, which does not hold it", dir, kIndex, tensor, shard));
}

PretrainedWeights::Found PretrainedWeights::find(const std::string& name) const {
  const auto it = file_of_.find(name);
  if (it == file_of_.end()) return {nullptr, nullptr};
  const checkpoint::SafetensorsFile* f = files_[it->second].get();
  return {f, f->find(name)};
}

std::vector<std::string> PretrainedWeights::names() const {
  std::vector<std::string> out;
  for (const auto& f : files_)
    for (const auto& t : f->tensors()) out.push_back(t.name);
  return out;
}

void PretrainedWeights::copy(const std::string& name, std::int64_t first, std::span<float> out) const {
  const auto [file, t] = find(name);
  HPU_CHECK(t != nullptr, "{}: no tensor {}", dir_, name);
  file->copy(*t, first, out);
  bytes_read_ += out.size() * device::logicalSize(t->dtype);
}

std::uint64_t PretrainedWeights::bytesStored() const {
  std::uint64_t n = 0;
  for (const auto& f : files_)
    for (const auto& t : f->tensors()) n += t.end - t.begin;
  return n;
}

void loadPretrainedWeights(const nn::Module& module, const std::function<std::string(const std::string&)>& key,
                           const std::function<PretrainedLoad(const nn::NamedTensor&)>& how,
                           const PretrainedWeights& weights, const std::set<std::string>& other_parts) {
  std::vector<std::string> missing, misshapen;
  std::set<std::string> used;
  std::vector<nn::NamedTensor> tensors = module.namedParameters();
  for (auto& b : module.namedBuffers()) tensors.push_back(std::move(b));
  for (const nn::NamedTensor& p : tensors) {
    const PretrainedLoad load = how(p);
    if (load == PretrainedLoad::kAbsent) continue;
    const std::string name = key(p.name);
    const auto [file, stored] = weights.find(name);
    if (stored == nullptr) {
      if (!notSavedByTransformers(name)) missing.push_back(name);
      continue;
    }
    used.insert(name);
    // A tensor-parallel rank's piece is checked against the whole tensor and reads its part of the file.
    const Shape whole = p.shard.fullShape(p.tensor.shape());
    const std::vector<std::int64_t> want(whole.dims().begin(), whole.dims().end());
    if (stored->shape != want) {
      misshapen.push_back(fmt::format("{} is {} in the files and {} in the model", name, shapeText(stored->shape),
                                      shapeText(want)));
      continue;
    }
    if (stored->dtype == device::DType::kInt64 || !device::isFloating(p.tensor.dtype())) {
      misshapen.push_back(fmt::format("{} is {} in the files and {} in the model", name,
                                      device::dtypeName(stored->dtype), device::dtypeName(p.tensor.dtype())));
      continue;
    }
    if (p.tensor.shapeOnly() || load == PretrainedLoad::kCheckOnly) continue;  // estimate needs the shapes alone
    Tensor t = p.tensor;
    const std::span<float> values = t.values();
    p.shard.forEachRun(t.shape(), [&](std::int64_t first, std::int64_t local, std::int64_t count) {
      weights.copy(name, first, values.subspan(static_cast<std::size_t>(local), static_cast<std::size_t>(count)));
    });
    if (t.dtype() == device::DType::kBFloat16 || t.dtype() == device::DType::kFloat16)
      device::roundInPlace(t.values(), t.dtype());
  }
  std::vector<std::string> unexpected;
  for (const std::string& name : weights.names())
    if (!used.count(name) && !other_parts.count(name) && !notSavedByTransformers(name) &&
        !name.ends_with("lm_head.weight"))
      unexpected.push_back(name);
  if (missing.empty() && unexpected.empty() && misshapen.empty()) return;
  std::string msg = fmt::format("model.init_args.pretrained: the weights in {} do not fit the model built from its "
                                "config.json:",
                                weights.dir());
  const auto list = [&](const char* what, const std::vector<std::string>& names) {
    if (names.empty()) return;
    msg += fmt::format("\n  {} ({}): {}", what, names.size(), fmt::join(names, ", "));
  };
  list("missing from the files", missing);
  list("in the files but not in the model", unexpected);
  list("of another shape", misshapen);
  throw UsageError(msg);
}

std::string hfConfigJson(const TransformerConfig& c, device::DType dtype) {
  // The keys transformers 5 writes for each config class (save_pretrained of
  // the release tests/interop/requirements.txt pins), in its sorted order.
  json j;
  const FamilyInfo& info = c.info();
  const bool mistral = c.model_type == "mistral";
  const auto id = [](const std::optional<std::int64_t>& v) { return v ? json(*v) : json(nullptr); };
  j["architectures"] = {mistral ? "MistralForCausalLM" : info.model_class};
  j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  j["bos_token_id"] = id(c.bos_token_id);
  j["eos_token_id"] = id(c.eos_token_id);
  j["pad_token_id"] = id(c.pad_token_id);
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["initializer_range"] = c.initializer_range;
  j["dtype"] = torchDtype(dtype);
  j["use_cache"] = true;
  if (c.family == Family::kGpt2) {
    j["n_positions"] = c.max_position_embeddings;
    j["n_embd"] = c.hidden_size;
    j["n_layer"] = c.num_hidden_layers;
    j["n_head"] = c.num_attention_heads;
    j["n_inner"] = c.intermediate_size;
    j["layer_norm_epsilon"] = c.norm_eps;
    j["activation_function"] = c.activation;
    j["resid_pdrop"] = c.resid_dropout;
    j["embd_pdrop"] = c.embd_dropout;
    j["attn_pdrop"] = c.attention_dropout;
    j["scale_attn_weights"] = true;
    return j.dump(2) + "\n";
  }
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  // Qwen2Config and Phi3Config have no head_dim: theirs is hidden / heads.
  if (c.family != Family::kQwen2 && c.family != Family::kPhi3) j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.norm_eps;
  json rope{{"rope_theta", c.rope_theta}, {"rope_type", "default"}};
  switch (c.rope_scaling.type) {
    case ops::RopeScaling::Type::kNone: break;
    case ops::RopeScaling::Type::kLinear:
      rope["rope_type"] = "linear";
      rope["factor"] = c.rope_scaling.factor;
      break;
    case ops::RopeScaling::Type::kLlama3:
      rope["rope_type"] = "llama3";
      rope["factor"] = c.rope_scaling.factor;
      rope["low_freq_factor"] = c.rope_scaling.low_freq_factor;
      rope["high_freq_factor"] = c.rope_scaling.high_freq_factor;
      rope["original_max_position_embeddings"] = c.rope_scaling.original_max_position_embeddings;
      break;
  }
  if (c.family == Family::kPhi3) rope["partial_rotary_factor"] = 1.0;
  j["rope_parameters"] = rope;
  j[c.family == Family::kGemma2 ? "hidden_activation" : "hidden_act"] = c.hidden_act;
  j["attention_dropout"] = c.attention_dropout;
  const json window = c.sliding_window == 0 ? json(nullptr) : json(c.sliding_window);
  std::vector<std::string> layer_types;
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l)
    layer_types.push_back(c.slidingWindowOf(l) > 0 ? "sliding_attention" : "full_attention");
  switch (c.family) {
    case Family::kLlama:
      if (mistral) {
        j["sliding_window"] = window;
      } else {
        j["attention_bias"] = c.qkv_bias;
        j["mlp_bias"] = c.mlp_bias;
        j["pretraining_tp"] = 1;
      }
      break;
    case Family::kQwen2: {
      // A window on the layers from the first sliding one on (max_window_layers).
      const auto first = std::find(layer_types.begin(), layer_types.end(), "sliding_attention");
      j["use_sliding_window"] = c.sliding_window > 0;
      j["sliding_window"] = window;
      j["max_window_layers"] = c.sliding_window > 0 ? first - layer_types.begin() : 28;
      j["layer_types"] = layer_types;
      break;
    }
    case Family::kGemma2:
      // Gemma2Config types it int (and refuses 24.0).
      j["query_pre_attn_scalar"] = c.query_pre_attn_scalar == std::floor(c.query_pre_attn_scalar)
                                       ? json(static_cast<std::int64_t>(c.query_pre_attn_scalar))
                                       : json(c.query_pre_attn_scalar);
      j["attn_logit_softcapping"] = c.attn_logit_softcapping > 0 ? json(c.attn_logit_softcapping) : json(nullptr);
      j["final_logit_softcapping"] = c.final_logit_softcapping > 0 ? json(c.final_logit_softcapping) : json(nullptr);
      j["sliding_window"] = window;
      j["layer_types"] = layer_types;
      [[fallthrough]];
    case Family::kGemma:
      j["attention_bias"] = c.qkv_bias;
      j["use_bidirectional_attention"] = nullptr;
      break;
    case Family::kPhi3:
      j["resid_pdrop"] = c.resid_dropout;
      j["embd_pdrop"] = 0.0;
      j["original_max_position_embeddings"] =
          c.original_max_position_embeddings > 0 ? c.original_max_position_embeddings : c.max_position_embeddings;
      j["sliding_window"] = window;
      break;
    case Family::kMixtral:
      j["num_local_experts"] = c.num_local_experts;
      j["num_experts_per_tok"] = c.num_experts_per_tok;
      j["output_router_logits"] = c.output_router_logits;
      j["router_aux_loss_coef"] = c.router_aux_loss_coef;
      j["router_jitter_noise"] = 0.0;
      j["sliding_window"] = window;
      break;
    case Family::kGpt2:
      break;
  }
  return j.dump(2) + "\n";
}

std::string hfGenerationConfigJson(std::optional<std::int64_t> bos, std::optional<std::int64_t> eos,
                                   std::optional<std::int64_t> pad) {
  json j = json::object();
  if (bos) j["bos_token_id"] = *bos;
  if (eos) j["eos_token_id"] = *eos;
  if (pad) j["pad_token_id"] = *pad;
  return j.dump(2) + "\n";
}

void writePretrainedWeights(const std::string& dir, std::vector<checkpoint::TensorEntry> tensors,
                            std::uint64_t max_shard_bytes) {
  const auto bytesOf = [](const checkpoint::TensorEntry& t) {
    return static_cast<std::uint64_t>(t.values.size() + t.ints.size()) * device::logicalSize(t.dtype);
  };
  // transformers' split: a shard takes tensors in order until the next would
  // pass the limit (a tensor larger than the limit gets a shard alone).
  std::vector<checkpoint::Checkpoint> shards(1);
  std::uint64_t in_shard = 0, total = 0;
  for (auto& t : tensors) {
    const std::uint64_t n = bytesOf(t);
    if (in_shard > 0 && in_shard + n > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    in_shard += n;
    total += n;
    shards.back().tensors.push_back(std::move(t));
  }
  const fs::path root(dir);
  for (auto& s : shards) s.metadata["format"] = "pt";
  if (shards.size() == 1) {
    checkpoint::writeSafetensorsFile(shards[0], (root / kWeights).string());
    return;
  }
  json index{{"metadata", {{"total_size", total}}}, {"weight_map", json::object()}};
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const std::string name = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    for (const auto& t : shards[i].tensors) index["weight_map"][t.name] = name;
    checkpoint::writeSafetensorsFile(shards[i], (root / name).string());
  }
  writeFileAtomically((root / kIndex).string(), index.dump(2) + "\n");
}

std::string peftAdapterConfigJson(const nn::LoraSettings& s, const std::string& base_model,
                                  const std::string& model_type) {
  json j;
  j["peft_type"] = "LORA";
  j["task_type"] = "CAUSAL_LM";
  j["base_model_name_or_path"] = base_model.empty() ? json(nullptr) : json(base_model);
  j["r"] = s.r;
  j["lora_alpha"] = s.lora_alpha;
  j["lora_dropout"] = s.lora_dropout;
  if (s.target_modules_regex.empty())
    j["target_modules"] = s.target_modules;
  else
    j["target_modules"] = s.target_modules_regex;
  j["bias"] = s.bias;
  j["modules_to_save"] = s.modules_to_save.empty() ? json(nullptr) : json(s.modules_to_save);
  j["fan_in_fan_out"] = model_type == "gpt2";
  j["use_rslora"] = s.use_rslora;
  j["use_dora"] = false;
  j["init_lora_weights"] = true;
  j["inference_mode"] = true;
  j["layers_to_transform"] = nullptr;
  j["layers_pattern"] = nullptr;
  j["rank_pattern"] = json::object();
  j["alpha_pattern"] = json::object();
  j["revision"] = nullptr;
  return j.dump(2) + "\n";
}

nn::LoraSettings readPeftAdapterConfig(const std::string& dir) {
  const std::string path = (fs::path(dir) / "adapter_config.json").string();
  if (!fs::exists(path))
    throw UsageError(fmt::format("model.init_args.lora_path: {} has no adapter_config.json (a PEFT adapter directory)",
                                 dir));
  const json j = json::parse(readFile(path), nullptr, false);
  if (!j.is_object()) throw UsageError(path + ": not a JSON object (PEFT's adapter_config.json)");
  const auto refuse = [&](const std::string& key, const std::string& why) {
    throw UsageError(fmt::format("{}: {}: {}", path, key, why));
  };
  const auto get = [&](const char* key) -> const json* {
    const auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  };
  if (const json* t = get("peft_type"); t == nullptr || *t != "LORA")
    refuse("peft_type", (t ? t->dump() : "null") + " is not LORA: hpu-train loads LoRA adapters");
  nn::LoraSettings s;
  if (const json* v = get("r")) {
    if (!v->is_number_integer() || v->get<std::int64_t>() < 1) refuse("r", "expected a positive integer");
    s.r = v->get<std::int64_t>();
  }
  if (const json* v = get("lora_alpha")) {
    if (!v->is_number()) refuse("lora_alpha", "expected a number");
    s.lora_alpha = v->get<double>();
  }
  if (const json* v = get("lora_dropout")) {
    if (!v->is_number()) refuse("lora_dropout", "expected a number");
    s.lora_dropout = v->get<float>();
  }
  if (const json* v = get("target_modules")) {
    if (v->is_string())
      s.target_modules_regex = v->get<std::string>();
    else if (v->is_array() && std::all_of(v->begin(), v->end(), [](const json& e) { return e.is_string(); }))
      s.target_modules = v->get<std::vector<std::string>>();
    else
      refuse("target_modules", "expected a list of module names or a regular expression");
  }
  if (const json* v = get("bias")) {
    if (!v->is_string()) refuse("bias", "expected none, all or lora_only");
    s.bias = v->get<std::string>();
  }
  if (const json* v = get("modules_to_save")) {
    if (!v->is_array()) refuse("modules_to_save", "expected a list of module names");
    s.modules_to_save = v->get<std::vector<std::string>>();
  }
  if (const json* v = get("use_rslora")) s.use_rslora = v->is_boolean() && v->get<bool>();
  if (const json* v = get("use_dora"); v != nullptr && *v != false) refuse("use_dora", "DoRA is not implemented");
  for (const char* key : {"layers_to_transform", "layers_pattern"})
    if (get(key) != nullptr) refuse(key, "is not implemented: every targeted layer is adapted");
  for (const char* key : {"rank_pattern", "alpha_pattern"})
    if (const json* v = get(key); v != nullptr && !v->empty()) refuse(key, "per-layer ranks and alphas are not implemented");
  return s;
}

}  // namespace hpu::core::models
