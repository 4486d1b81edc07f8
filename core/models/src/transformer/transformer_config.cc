#include "hpu/core/models/transformer_config.h"

#include <spdlog/fmt/fmt.h>

#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <vector>

#include "hpu/core/base/errors.h"
#include "hpu/core/base/file_io.h"
#include "hpu/device/check.h"

namespace hpu::core::models {
namespace {

using nlohmann::json;

const FamilyInfo kFamilies[] = {
    {Family::kLlama, "LlamaForCausalLM", "llama,mistral", "LlamaConfig / MistralConfig", "Llama", 32000},
    {Family::kQwen2, "Qwen2ForCausalLM", "qwen2", "Qwen2Config", "Qwen2", 151936},
    {Family::kGemma, "GemmaForCausalLM", "gemma", "GemmaConfig", "Gemma", 256000},
    {Family::kGemma2, "Gemma2ForCausalLM", "gemma2", "Gemma2Config", "Gemma2", 256000},
    {Family::kPhi3, "Phi3ForCausalLM", "phi3", "Phi3Config", "Phi3", 32064},
    {Family::kMixtral, "MixtralForCausalLM", "mixtral", "MixtralConfig", "Mixtral", 32000},
    {Family::kGpt2, "GPT2LMHeadModel", "gpt2", "GPT2Config", "GPT2", 50257},
};

std::vector<std::string> modelTypesOf(const FamilyInfo& info) {
  std::vector<std::string> out;
  std::string_view rest = info.model_types;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    out.emplace_back(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return out;
}


// Keys of Hugging Face's PretrainedConfig and of the family configs that do
// not change the math of a forward or backward: bookkeeping, dtype hints,
// generation defaults, heads hpu-train does not build (summary_*).
const std::set<std::string>& harmlessKeys() {
  static const std::set<std::string> keys{
      "_name_or_path", "_commit_hash", "_attn_implementation", "architectures", "transformers_version", "torch_dtype", "dtype",
      "use_bfloat16", "use_cache", "return_dict", "output_hidden_states", "output_attentions", "torchscript",
      "tf_legacy_loss", "is_decoder", "tie_encoder_decoder", "chunk_size_feed_forward", "finetuning_task", "id2label",
      "label2id", "num_labels", "task_specific_params", "problem_type", "tokenizer_class", "prefix", "bos_token_id",
      "sep_token_id", "decoder_start_token_id", "max_length", "min_length", "do_sample", "early_stopping", "num_beams",
      "num_beam_groups", "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
      "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences",
      "output_scores", "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values",
      "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens",
      // Remote code the file names (trust_remote_code); the class it builds is model_type's.
      "auto_map",
      // Llama: pretraining_tp splits the projections' products (the same math).
      "pretraining_tp",
      // Gemma 2: the KV cache's layout in generation (the same tokens).
      "cache_implementation",
      // Phi-3: embd_pdrop is a Phi3Config key no Phi3Model layer reads.
      "embd_pdrop",
      // GPT-2: the sequence-classification head, and an upcast that only
      // reorders float32 arithmetic.
      "summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels", "summary_first_dropout",
      "reorder_and_upcast_attn"};
  return keys;
}

// config.json, read key by key: what is taken is checked off, and
// whatever is left unread must be harmless.
class ConfigFile {
 public:
  explicit ConfigFile(std::string path) : path_(std::move(path)) {
    const std::string text = readFile(path_);
    json_ = json::parse(text, nullptr, false);
    if (!json_.is_object()) throw UsageError(fmt::format("{}: not a JSON object (a Hugging Face config.json)", path_));
  }
  bool present(const std::string& key) const { return json_.contains(key); }
  const json* take(const std::string& key) {
    read_.insert(key);
    auto it = json_.find(key);
    return it == json_.end() || it->is_null() ? nullptr : &*it;
  }
  [[noreturn]] void refuse(const std::string& key, const std::string& why) const {
    throw UsageError(fmt::format("{}: {}: {}", path_, key, why));
  }
  std::int64_t integer(const std::string& key, const json& v) const {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0)
      refuse(key, "expected a non-negative integer, got " + v.dump());
    return v.get<std::int64_t>();
  }
  double number(const std::string& key, const json& v) const {
    if (!v.is_number()) refuse(key, "expected a number, got " + v.dump());
    return v.get<double>();
  }
  bool boolean(const std::string& key, const json& v) const {
    if (!v.is_boolean()) refuse(key, "expected true or false, got " + v.dump());
    return v.get<bool>();
  }
  std::string string(const std::string& key, const json& v) const {
    if (!v.is_string()) refuse(key, "expected a string, got " + v.dump());
    return v.get<std::string>();
  }
  // A key hpu-train implements only at one value.
  void require(const std::string& key, const json& want, const std::string& why) {
    const json* v = take(key);
    if (v != nullptr && *v != want) refuse(key, v->dump() + " " + why);
  }
  void checkRest(const std::string& family) const {
    for (const auto& [key, value] : json_.items())
      if (!read_.count(key) && !harmlessKeys().count(key))
        refuse(key, "is not a " + family +
                        " key hpu-train implements; a key it does not know could change the architecture, so it is "
                        "refused rather than ignored (remove it if it does not)");
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  json json_;
  std::set<std::string> read_;
};


// The rope dictionary as transformers 5 reads it: rope_scaling (4) or
// rope_parameters (5), with rope_type (or type) "default", "linear" or
// "llama3"; its rope_theta and partial_rotary_factor are read by the caller.
ops::RopeScaling readRopeScaling(const ConfigFile& f, const std::string& key, const json& v) {
  const auto fail = [&](const std::string& why) { f.refuse(key, v.dump() + ": " + why); };
  if (!v.is_object()) fail("expected an object with rope_type");
  const json* type = v.contains("rope_type") ? &v["rope_type"] : v.contains("type") ? &v["type"] : nullptr;
  if (type == nullptr) {
    if (key == "rope_scaling") fail("no rope_type");
    return {};  // rope_parameters without a type: the default rotation
  }
  if (!type->is_string()) fail("rope_type must be a string");
  const auto number = [&](const char* name, bool required, double fallback) {
    if (!v.contains(name)) {
      if (required) fail(std::string("no ") + name);
      return fallback;
    }
    if (!v[name].is_number() || v[name].get<double>() <= 0) fail(std::string(name) + " must be a positive number");
    return v[name].get<double>();
  };
  ops::RopeScaling s;
  const std::string name = type->get<std::string>();
  if (name == "default") return s;
  s.factor = static_cast<float>(number("factor", true, 1));
  if (name == "linear") {
    s.type = ops::RopeScaling::Type::kLinear;
  } else if (name == "llama3") {
    s.type = ops::RopeScaling::Type::kLlama3;
    s.low_freq_factor = static_cast<float>(number("low_freq_factor", true, 1));
    s.high_freq_factor = static_cast<float>(number("high_freq_factor", true, 4));
    s.original_max_position_embeddings =
        static_cast<std::int64_t>(number("original_max_position_embeddings", true, 8192));
    if (s.high_freq_factor <= s.low_freq_factor) fail("high_freq_factor must exceed low_freq_factor");
  } else {
    fail("rope_type '" + name + "' is not implemented (default, linear, llama3)");
  }
  return s;
}

// Rotary embeddings: rope_theta and rope_scaling (transformers 4) or
// rope_parameters (5); where both give a value, the dictionary's wins, as
// transformers 5 standardises them.
void readRope(ConfigFile& f, TransformerConfig& c) {
  if (const json* v = f.take("rope_theta")) c.rope_theta = f.number("rope_theta", *v);
  const json* scaling = f.take("rope_scaling");
  const json* parameters = f.take("rope_parameters");
  const std::string key = scaling != nullptr ? "rope_scaling" : "rope_parameters";
  const json* rope = scaling != nullptr ? scaling : parameters;
  double partial = 1.0;
  if (const json* v = f.take("partial_rotary_factor")) partial = f.number("partial_rotary_factor", *v);
  if (rope == nullptr) return;
  c.rope_scaling = readRopeScaling(f, key, *rope);
  if (rope->contains("rope_theta")) c.rope_theta = f.number(key + ".rope_theta", (*rope)["rope_theta"]);
  if (rope->contains("partial_rotary_factor")) partial = f.number(key + ".partial_rotary_factor", (*rope)["partial_rotary_factor"]);
  if (partial != 1.0)
    f.refuse(key, fmt::format("partial_rotary_factor {} is not implemented: rotary embeddings turn every dimension "
                              "of a head (1.0)",
                              partial));
}

// layer_types (transformers 5): "full_attention" or "sliding_attention" per layer.
std::vector<bool> readLayerTypes(const ConfigFile& f, const json& v) {
  if (!v.is_array()) f.refuse("layer_types", "expected a list of \"full_attention\" / \"sliding_attention\"");
  std::vector<bool> sliding;
  for (const json& t : v) {
    if (t == "sliding_attention")
      sliding.push_back(true);
    else if (t == "full_attention")
      sliding.push_back(false);
    else
      f.refuse("layer_types", t.dump() + " is not implemented (full_attention, sliding_attention)");
  }
  return sliding;
}

// The model_type `c` must have, given by the file or implied by the family.
void checkModelType(ConfigFile& f, TransformerConfig& c) {
  const FamilyInfo& info = c.info();
  const json* v = f.take("model_type");
  if (v == nullptr) return;
  c.model_type = f.string("model_type", *v);
  const FamilyInfo* built = familyOfModelType(c.model_type);
  if (built == nullptr || built->family != c.family)
    f.refuse("model_type", fmt::format("'{}' is not {}: {} builds {}", c.model_type,
                                       fmt::join(modelTypesOf(info), " or "), info.model_class,
                                       modelTypesOf(info).size() > 1 ? "those" : "it"));
}

// Every family but GPT-2: Llama's keys, and each family's own.
void readDecoder(ConfigFile& f, TransformerConfig& c) {
  if (c.model_type == "mistral") {  // MistralConfig's defaults for what the file leaves out
    c.intermediate_size = 14336;
    c.num_key_value_heads = 8;
    c.max_position_embeddings = 4096 * 32;
    c.sliding_window = 4096;
  }
  const Family family = c.family;
  const auto integer = [&](const char* key, std::int64_t& field) {
    if (const json* v = f.take(key)) field = f.integer(key, *v);
  };
  const auto real = [&](const char* key, auto& field) {
    if (const json* v = f.take(key)) field = static_cast<std::decay_t<decltype(field)>>(f.number(key, *v));
  };
  const auto flag = [&](const char* key, bool& field) {
    if (const json* v = f.take(key)) field = f.boolean(key, *v);
  };
  integer("vocab_size", c.vocab_size);
  integer("hidden_size", c.hidden_size);
  integer("intermediate_size", c.intermediate_size);
  integer("num_hidden_layers", c.num_hidden_layers);
  integer("num_attention_heads", c.num_attention_heads);
  integer("num_key_value_heads", c.num_key_value_heads);
  integer("head_dim", c.head_dim);  // null: hidden_size / num_attention_heads
  integer("max_position_embeddings", c.max_position_embeddings);
  // sliding_window: null (or 0) is no window; absent, the family's default.
  if (f.present("sliding_window")) {
    const json* v = f.take("sliding_window");
    c.sliding_window = v == nullptr ? 0 : f.integer("sliding_window", *v);
  }
  // Gemma 2's first files also wrote the window as sliding_window_size.
  if (const json* v = f.take("sliding_window_size"); v != nullptr && f.integer("sliding_window_size", *v) != c.sliding_window)
    f.refuse("sliding_window_size", fmt::format("{} differs from sliding_window {}", v->dump(), c.sliding_window));
  real("rms_norm_eps", c.norm_eps);
  readRope(f, c);
  flag("tie_word_embeddings", c.tie_word_embeddings);
  real("attention_dropout", c.attention_dropout);
  real("initializer_range", c.initializer_range);
  if (family == Family::kQwen2) {
    // Qwen2: q, k and v always have biases, o_proj none; the window applies
    // with use_sliding_window, to the layers from max_window_layers on.
    bool use_sliding_window = false;
    std::int64_t max_window_layers = 28;
    flag("use_sliding_window", use_sliding_window);
    integer("max_window_layers", max_window_layers);
    if (!use_sliding_window) c.sliding_window = 0;
    if (c.sliding_window > 0)
      for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) c.sliding_layers.push_back(l >= max_window_layers);
  } else {
    bool attention_bias = false;
    flag("attention_bias", attention_bias);
    if (attention_bias && family == Family::kPhi3)
      f.refuse("attention_bias", "true is not implemented: Phi-3's qkv_proj and o_proj have no biases");
    c.qkv_bias = c.output_bias = attention_bias;
  }
  if (family == Family::kLlama) flag("mlp_bias", c.mlp_bias);
  if (const json* v = f.take("layer_types")) {
    c.sliding_layers = readLayerTypes(f, *v);
    if (static_cast<std::int64_t>(c.sliding_layers.size()) != c.num_hidden_layers)
      f.refuse("layer_types", fmt::format("{} entries for {} layers (num_hidden_layers)", c.sliding_layers.size(),
                                          c.num_hidden_layers));
  }
  // The gated MLP's activation: hidden_act, or Gemma 2's hidden_activation
  // (which Gemma's transformers 4 files also write, and which then wins).
  const bool gemma = family == Family::kGemma || family == Family::kGemma2;
  for (const char* key : {"hidden_act", "hidden_activation"}) {
    const json* v = f.take(key);
    if (v == nullptr) continue;
    std::string act = f.string(key, *v);
    if (gemma && act == "gelu") act = "gelu_pytorch_tanh";  // GemmaConfig's reading of the first releases' value
    if (act == "gelu_new") act = "gelu_pytorch_tanh";  // the same tanh approximation
    if (act != "silu" && act != "gelu_pytorch_tanh" && act != "gelu")
      f.refuse(key, fmt::format("'{}' is not implemented: the gated MLP computes silu, gelu or gelu_pytorch_tanh", act));
    c.hidden_act = act;
  }
  if (gemma) {
    if (const json* v = f.take("use_bidirectional_attention"); v != nullptr && *v != false)
      f.refuse("use_bidirectional_attention", v->dump() + " is not implemented: attention is causal");
  }
  if (family == Family::kGemma2) {
    real("query_pre_attn_scalar", c.query_pre_attn_scalar);
    for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"}) {
      double& field = std::string(key) == "attn_logit_softcapping" ? c.attn_logit_softcapping : c.final_logit_softcapping;
      if (f.present(key)) {
        const json* v = f.take(key);
        field = v == nullptr ? 0 : f.number(key, *v);
      }
    }
  }
  if (family == Family::kPhi3) {
    real("resid_pdrop", c.resid_dropout);
    integer("original_max_position_embeddings", c.original_max_position_embeddings);
  }
  if (family == Family::kMixtral) {
    integer("num_local_experts", c.num_local_experts);
    integer("num_experts_per_tok", c.num_experts_per_tok);
    flag("output_router_logits", c.output_router_logits);
    real("router_aux_loss_coef", c.router_aux_loss_coef);
    if (const json* v = f.take("router_jitter_noise"); v != nullptr && f.number("router_jitter_noise", *v) != 0)
      f.refuse("router_jitter_noise", v->dump() + " is not implemented: the router reads the hidden states as they are (0)");
  }
}

void readGpt2(ConfigFile& f, TransformerConfig& c) {
  const auto integer = [&](const char* key, std::int64_t& field) {
    if (const json* v = f.take(key)) field = f.integer(key, *v);
  };
  integer("vocab_size", c.vocab_size);
  integer("n_positions", c.max_position_embeddings);
  integer("n_embd", c.hidden_size);
  integer("n_layer", c.num_hidden_layers);
  integer("n_head", c.num_attention_heads);
  integer("n_inner", c.intermediate_size);
  // n_ctx: the older name of n_positions, which it must equal.
  if (const json* v = f.take("n_ctx"); v != nullptr && f.integer("n_ctx", *v) != c.max_position_embeddings)
    f.refuse("n_ctx", v->dump() + " differs from n_positions " + std::to_string(c.max_position_embeddings));
  if (const json* v = f.take("layer_norm_epsilon")) c.norm_eps = f.number("layer_norm_epsilon", *v);
  if (const json* v = f.take("activation_function")) c.activation = f.string("activation_function", *v);
  if (const json* v = f.take("resid_pdrop")) c.resid_dropout = static_cast<float>(f.number("resid_pdrop", *v));
  if (const json* v = f.take("embd_pdrop")) c.embd_dropout = static_cast<float>(f.number("embd_pdrop", *v));
  if (const json* v = f.take("attn_pdrop")) c.attention_dropout = static_cast<float>(f.number("attn_pdrop", *v));
  if (const json* v = f.take("tie_word_embeddings")) c.tie_word_embeddings = f.boolean("tie_word_embeddings", *v);
  if (const json* v = f.take("initializer_range")) c.initializer_range = f.number("initializer_range", *v);
  f.require("scale_attn_weights", true, "is not implemented: attention scores are scaled by 1/sqrt(head_dim)");
  f.require("scale_attn_by_inverse_layer_idx", false, "is not implemented");
  f.require("add_cross_attention", false, "is not implemented: GPT2LMHeadModel is decoder-only");
}

// The family's own defaults (its config class's in transformers 5), but for
// the vocabulary: unset (0) takes the data's tokenizer's.
TransformerConfig defaults(Family family) {
  TransformerConfig c;
  c.family = family;
  c.model_type = modelTypesOf(familyInfo(family)).front();
  const auto sizes = [&c](std::int64_t hidden, std::int64_t intermediate, std::int64_t layers, std::int64_t heads,
                          std::int64_t positions) {
    c.hidden_size = hidden;
    c.intermediate_size = intermediate;
    c.num_hidden_layers = layers;
    c.num_attention_heads = heads;
    c.max_position_embeddings = positions;
  };
  switch (family) {
    case Family::kLlama:
      sizes(4096, 11008, 32, 32, 2048);
      c.bos_token_id = 1;
      c.eos_token_id = 2;
      break;
    case Family::kQwen2:
      sizes(4096, 22016, 32, 32, 32768);
      c.qkv_bias = true;
      break;
    case Family::kGemma:
      sizes(3072, 24576, 28, 16, 8192);
      break;
    case Family::kGemma2:
      sizes(2304, 9216, 26, 8, 8192);
      c.num_key_value_heads = 4;
      c.query_pre_attn_scalar = 256;
      c.sliding_window = 4096;
      c.attn_logit_softcapping = 50;
      c.final_logit_softcapping = 30;
      break;
    case Family::kPhi3:
      sizes(3072, 8192, 32, 32, 4096);
      c.original_max_position_embeddings = 4096;
      c.norm_eps = 1e-5;
      c.bos_token_id = 1;
      c.eos_token_id = c.pad_token_id = 32000;
      break;
    case Family::kMixtral:
      sizes(4096, 14336, 32, 32, 4096 * 32);
      c.num_key_value_heads = 8;
      c.norm_eps = 1e-5;
      c.rope_theta = 1e6;
      c.num_local_experts = 8;
      c.num_experts_per_tok = 2;
      c.bos_token_id = 1;
      c.eos_token_id = 2;
      break;
    case Family::kGpt2:
      sizes(768, 0, 12, 12, 1024);  // n_inner 0: 4 x n_embd
      c.norm_eps = 1e-5;
      c.activation = "gelu_new";
      c.resid_dropout = c.embd_dropout = c.attention_dropout = 0.1f;
      c.tie_word_embeddings = true;
      c.bos_token_id = c.eos_token_id = 50256;
      break;
  }
  if (family == Family::kGemma || family == Family::kGemma2) {
    c.hidden_act = "gelu_pytorch_tanh";
    c.norm_unit_offset = c.scale_embeddings = c.tie_word_embeddings = true;
    c.head_dim = 256;
    c.pad_token_id = 0;
    c.eos_token_id = 1;
    c.bos_token_id = 2;
  }
  return c;
}

// Gemma 2's default layer_types: every other layer, the first included, slides.
std::vector<bool> alternatingSlidingLayers(std::int64_t layers) {
  std::vector<bool> out;
  for (std::int64_t l = 0; l < layers; ++l) out.push_back(l % 2 == 0);
  return out;
}

}  // namespace

const FamilyInfo& familyInfo(Family family) {
  for (const FamilyInfo& f : kFamilies)
    if (f.family == family) return f;
  HPU_CHECK(false, "no FamilyInfo for family {}", static_cast<int>(family));
  return kFamilies[0];
}

const FamilyInfo* familyOfModelType(const std::string& model_type) {
  for (const FamilyInfo& f : kFamilies)
    for (const std::string& t : modelTypesOf(f))
      if (t == model_type) return &f;
  return nullptr;
}

std::string supportedModelTypes() {
  std::vector<std::string> all;
  for (const FamilyInfo& f : kFamilies)
    for (std::string& t : modelTypesOf(f)) all.push_back(std::move(t));
  return fmt::format("{}", fmt::join(all, ", "));
}

std::string readModelType(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string file = fs::is_directory(path) ? (fs::path(path) / "config.json").string() : path;
  if (!fs::exists(file))
    throw UsageError(fmt::format("{} has no config.json (a Hugging Face model directory)", path));
  ConfigFile f(file);
  const json* v = f.take("model_type");
  if (v == nullptr) f.refuse("model_type", "missing: the Auto class builds the model config.json's model_type names");
  return f.string("model_type", *v);
}

TransformerConfig resolveTransformerConfig(Family family, const config::Params& p) {
  TransformerConfig c = defaults(family);
  const bool gpt2 = family == Family::kGpt2;
  // config.json: the given one, else the pretrained directory's.
  const std::string config_path =
      p.has("config") ? p.getString("config") : p.has("pretrained") ? p.getString("pretrained") + "/config.json" : "";
  bool layer_types_given = false;
  if (!config_path.empty()) {
    if (!p.has("config") && !std::filesystem::exists(config_path))
      throw UsageError(fmt::format("{}: {} has no config.json (a Hugging Face model directory)",
                                   p.pathOf("pretrained"), p.getString("pretrained")));
    ConfigFile f(config_path);
    checkModelType(f, c);
    layer_types_given = f.present("layer_types");
    if (gpt2)
      readGpt2(f, c);
    else
      readDecoder(f, c);
    for (const char* key : {"bos_token_id", "pad_token_id", "eos_token_id"}) {
      const std::string name = key;
      std::optional<std::int64_t>& field =
          name == "bos_token_id" ? c.bos_token_id : name == "pad_token_id" ? c.pad_token_id : c.eos_token_id;
      if (!f.present(key)) continue;
      const json* v = f.take(key);
      if (v == nullptr) {  // null: none, whatever the family's default
        field.reset();
        continue;
      }
      // eos_token_id may be a list (Llama 3): generation stops at the first.
      const json& id = v->is_array() && !v->empty() ? v->front() : *v;
      field = f.integer(key, id);
    }
    f.checkRest(c.info().config_class);
  } else {
    // Without a config.json the token ids are the tokenizer's (CausalLM), not the config class's defaults.
    c.bos_token_id.reset();
    c.eos_token_id.reset();
    c.pad_token_id.reset();
  }
  // init_args given beside the file win (those the family's schema declares).
  const auto given = [&](const char* name) { return p.schema().find(name) != nullptr && p.has(name); };
  const auto integer = [&](const char* name, std::int64_t& field) {
    if (given(name)) field = p.getInt(name);
  };
  const auto real = [&](const char* name, auto& field) {
    if (given(name)) field = static_cast<std::decay_t<decltype(field)>>(p.getFloat(name));
  };
  integer("vocab_size", c.vocab_size);
  c.eager_attention = p.getString("attn_implementation") == "eager";
  c.recompute_attention = p.node("gradient_checkpointing").str() == "selective";
  if (given("tie_word_embeddings")) c.tie_word_embeddings = p.getBool("tie_word_embeddings");
  real("initializer_range", c.initializer_range);
  if (!gpt2) {
    integer("hidden_size", c.hidden_size);
    integer("intermediate_size", c.intermediate_size);
    integer("num_hidden_layers", c.num_hidden_layers);
    integer("num_attention_heads", c.num_attention_heads);
    integer("num_key_value_heads", c.num_key_value_heads);
    integer("head_dim", c.head_dim);
    integer("max_position_embeddings", c.max_position_embeddings);
    real("rms_norm_eps", c.norm_eps);
    real("rope_theta", c.rope_theta);
    real("attention_dropout", c.attention_dropout);
    integer("num_local_experts", c.num_local_experts);
    integer("num_experts_per_tok", c.num_experts_per_tok);
    if (given("output_router_logits")) c.output_router_logits = p.getBool("output_router_logits");
    real("router_aux_loss_coef", c.router_aux_loss_coef);
  } else {
    integer("n_embd", c.hidden_size);
    integer("n_inner", c.intermediate_size);
    integer("n_layer", c.num_hidden_layers);
    integer("n_head", c.num_attention_heads);
    integer("n_positions", c.max_position_embeddings);
    real("layer_norm_epsilon", c.norm_eps);
    real("resid_pdrop", c.resid_dropout);
    real("embd_pdrop", c.embd_dropout);
    real("attn_pdrop", c.attention_dropout);
    if (given("activation_function")) c.activation = p.getString("activation_function");
  }
  // What the configs derive.
  if (c.num_key_value_heads == 0 || gpt2) c.num_key_value_heads = c.num_attention_heads;
  if (gpt2 && c.intermediate_size == 0) c.intermediate_size = 4 * c.hidden_size;
  if (family == Family::kGemma2 && !layer_types_given) c.sliding_layers = alternatingSlidingLayers(c.num_hidden_layers);
  if (static_cast<std::int64_t>(c.sliding_layers.size()) != c.num_hidden_layers) {
    // A layer count given beside the file: the rule that made the file's list, or every layer.
    if (family == Family::kGemma2)
      c.sliding_layers = alternatingSlidingLayers(c.num_hidden_layers);
    else if (!c.sliding_layers.empty())
      c.sliding_layers.resize(static_cast<std::size_t>(c.num_hidden_layers), c.sliding_layers.back());
  }
  const std::string where = config_path.empty() ? p.path() : config_path + " and " + p.path();
  const auto check = [&](bool ok, const std::string& what) {
    if (!ok) throw UsageError(fmt::format("{}: {}", where, what));
  };
  check(c.hidden_size > 0 && c.num_hidden_layers > 0 && c.num_attention_heads > 0 && c.intermediate_size > 0 &&
            c.max_position_embeddings > 0,
        "sizes must be positive");
  if (c.head_dim == 0) {
    check(c.hidden_size % c.num_attention_heads == 0,
          fmt::format("hidden size {} is not a multiple of the {} attention heads", c.hidden_size,
                      c.num_attention_heads));
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  check(c.num_attention_heads % c.num_key_value_heads == 0,
        fmt::format("{} attention heads are not a multiple of the {} key/value heads", c.num_attention_heads,
                    c.num_key_value_heads));
  check(gpt2 || c.head_dim % 2 == 0, fmt::format("head_dim {} must be even for rotary embeddings", c.head_dim));
  if (family == Family::kMixtral) {
    check(c.num_local_experts >= 1, "num_local_experts must be at least 1");
    check(c.num_experts_per_tok >= 1 && c.num_experts_per_tok <= c.num_local_experts,
          fmt::format("num_experts_per_tok {} must be between 1 and num_local_experts {}", c.num_experts_per_tok,
                      c.num_local_experts));
  }
  if (family == Family::kGemma2)
    check(c.query_pre_attn_scalar > 0, "query_pre_attn_scalar must be positive");
  static const std::set<std::string> kActivations{"gelu_new", "gelu_pytorch_tanh", "gelu", "relu", "silu", "swish"};
  check(!gpt2 || kActivations.count(c.activation),
        "activation_function '" + c.activation + "' is not one of gelu_new, gelu_pytorch_tanh, gelu, relu, silu");
  return c;
}

}  // namespace hpu::core::models
