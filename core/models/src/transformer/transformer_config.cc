#include "hpu/core/models/transformer_config.h"

#include <spdlog/fmt/fmt.h>

#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "hpu/core/base/errors.h"
#include "hpu/core/base/file_io.h"

namespace hpu::core::models {
namespace {

using nlohmann::json;

// Keys of Hugging Face's PretrainedConfig and of the three configs that do
// not change the math of a forward or backward: bookkeeping, dtype hints,
// generation defaults, heads hpu-train does not build (summary_*).
const std::set<std::string>& harmlessKeys() {
  static const std::set<std::string> keys{
      "_name_or_path", "_commit_hash", "_attn_implementation", "architectures", "transformers_version", "torch_dtype",
      "use_bfloat16", "use_cache", "return_dict", "output_hidden_states", "output_attentions", "torchscript",
      "tf_legacy_loss", "is_decoder", "tie_encoder_decoder", "chunk_size_feed_forward", "finetuning_task", "id2label",
      "label2id", "num_labels", "task_specific_params", "problem_type", "tokenizer_class", "prefix", "bos_token_id",
      "sep_token_id", "decoder_start_token_id", "max_length", "min_length", "do_sample", "early_stopping", "num_beams",
      "num_beam_groups", "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
      "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences",
      "output_scores", "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values",
      "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens",
      // Llama: pretraining_tp splits the projections' products (the same math).
      "pretraining_tp",
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

// rope_scaling as Hugging Face's rope initialisation reads it: "linear" and
// "llama3" (rope_type, or type in older files); the rest is refused.
ops::RopeScaling readRopeScaling(const ConfigFile& f, const json& v) {
  const auto fail = [&](const std::string& why) { f.refuse("rope_scaling", v.dump() + ": " + why); };
  if (!v.is_object()) fail("expected an object with rope_type and factor");
  const json* type = v.contains("rope_type") ? &v["rope_type"] : v.contains("type") ? &v["type"] : nullptr;
  if (type == nullptr || !type->is_string()) fail("no rope_type");
  const auto number = [&](const char* key, bool required, double fallback) {
    if (!v.contains(key)) {
      if (required) fail(std::string("no ") + key);
      return fallback;
    }
    if (!v[key].is_number() || v[key].get<double>() <= 0) fail(std::string(key) + " must be a positive number");
    return v[key].get<double>();
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

void readLlama(ConfigFile& f, TransformerConfig& c) {
  if (const json* v = f.take("model_type")) {
    c.model_type = f.string("model_type", *v);
    if (c.model_type != "llama" && c.model_type != "mistral")
      f.refuse("model_type", "'" + c.model_type + "' is not llama or mistral: LlamaForCausalLM builds those");
  }
  if (c.model_type == "mistral") {  // MistralConfig's defaults for what the file leaves out
    c.intermediate_size = 14336;
    c.num_key_value_heads = 8;
    c.max_position_embeddings = 4096 * 32;
    c.sliding_window = 4096;
  }
  const auto integer = [&](const char* key, std::int64_t& field) {
    if (const json* v = f.take(key)) field = f.integer(key, *v);
  };
  integer("vocab_size", c.vocab_size);
  integer("hidden_size", c.hidden_size);
  integer("intermediate_size", c.intermediate_size);
  integer("num_hidden_layers", c.num_hidden_layers);
  integer("num_attention_heads", c.num_attention_heads);
  integer("num_key_value_heads", c.num_key_value_heads);
  integer("head_dim", c.head_dim);
  integer("max_position_embeddings", c.max_position_embeddings);
  // sliding_window: null (or 0) is no window; absent, Mistral's default.
  if (f.present("sliding_window")) {
    const json* v = f.take("sliding_window");
    c.sliding_window = v == nullptr ? 0 : f.integer("sliding_window", *v);
  }
  if (const json* v = f.take("rms_norm_eps")) c.norm_eps = f.number("rms_norm_eps", *v);
  if (const json* v = f.take("rope_theta")) c.rope_theta = f.number("rope_theta", *v);
  if (const json* v = f.take("tie_word_embeddings")) c.tie_word_embeddings = f.boolean("tie_word_embeddings", *v);
  if (const json* v = f.take("attention_bias")) c.attention_bias = f.boolean("attention_bias", *v);
  if (const json* v = f.take("mlp_bias")) c.mlp_bias = f.boolean("mlp_bias", *v);
  if (const json* v = f.take("attention_dropout"))
    c.attention_dropout = static_cast<float>(f.number("attention_dropout", *v));
  if (const json* v = f.take("initializer_range")) c.initializer_range = f.number("initializer_range", *v);
  f.require("hidden_act", "silu", "is not implemented: Llama and Mistral's MLP uses silu");
  if (const json* v = f.take("rope_scaling")) c.rope_scaling = readRopeScaling(f, *v);
}

void readGpt2(ConfigFile& f, TransformerConfig& c) {
  f.require("model_type", "gpt2", "is not gpt2: GPT2LMHeadModel builds gpt2");
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

// The family's own defaults (LlamaConfig's, GPT2Config's), but for the
// vocabulary: unset (0) takes the data's tokenizer's, else 32000 / 50257.
TransformerConfig defaults(Family family) {
  TransformerConfig c;
  c.family = family;
  if (family == Family::kLlama) {
    c.model_type = "llama";
    c.hidden_size = 4096;
    c.intermediate_size = 11008;
    c.num_hidden_layers = 32;
    c.num_attention_heads = 32;
    c.max_position_embeddings = 2048;
    c.norm_eps = 1e-6;
  } else {
    c.model_type = "gpt2";
    c.hidden_size = 768;
    c.num_hidden_layers = 12;
    c.num_attention_heads = 12;
    c.max_position_embeddings = 1024;
    c.norm_eps = 1e-5;
    c.activation = "gelu_new";
    c.resid_dropout = c.embd_dropout = c.attention_dropout = 0.1f;
    c.tie_word_embeddings = true;
  }
  return c;
}

}  // namespace

TransformerConfig resolveTransformerConfig(Family family, const config::Params& p) {
  TransformerConfig c = defaults(family);
  // config.json: the given one, else the pretrained directory's.
  const std::string config_path =
      p.has("config") ? p.getString("config") : p.has("pretrained") ? p.getString("pretrained") + "/config.json" : "";
  if (!config_path.empty()) {
    if (!p.has("config") && !std::filesystem::exists(config_path))
      throw UsageError(fmt::format("{}: {} has no config.json (a Hugging Face model directory)",
                                   p.pathOf("pretrained"), p.getString("pretrained")));
    ConfigFile f(config_path);
    if (family == Family::kLlama)
      readLlama(f, c);
    else
      readGpt2(f, c);
    for (const char* key : {"pad_token_id", "eos_token_id"}) {
      const json* v = f.take(key);
      if (v == nullptr) continue;
      // eos_token_id may be a list (Llama 3): generation stops at the first.
      const json& id = v->is_array() && !v->empty() ? v->front() : *v;
      (std::string(key) == "pad_token_id" ? c.pad_token_id : c.eos_token_id) = f.integer(key, id);
    }
    f.checkRest(family == Family::kLlama ? "LlamaConfig / MistralConfig" : "GPT2Config");
  }
  // init_args given beside the file win.
  const auto integer = [&](const char* name, std::int64_t& field) {
    if (p.has(name)) field = p.getInt(name);
  };
  const auto real = [&](const char* name, auto& field) {
    if (p.has(name)) field = static_cast<std::decay_t<decltype(field)>>(p.getFloat(name));
  };
  integer("vocab_size", c.vocab_size);
  c.eager_attention = p.getString("attn_implementation") == "eager";
  c.recompute_attention = p.node("gradient_checkpointing").str() == "selective";
  if (p.has("tie_word_embeddings")) c.tie_word_embeddings = p.getBool("tie_word_embeddings");
  real("initializer_range", c.initializer_range);
  if (family == Family::kLlama) {
    integer("hidden_size", c.hidden_size);
    integer("intermediate_size", c.intermediate_size);
    integer("num_hidden_layers", c.num_hidden_layers);
    integer("num_attention_heads", c.num_attention_heads);
    integer("num_key_value_heads", c.num_key_value_heads);
    integer("max_position_embeddings", c.max_position_embeddings);
    real("rms_norm_eps", c.norm_eps);
    real("rope_theta", c.rope_theta);
    real("attention_dropout", c.attention_dropout);
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
    if (p.has("activation_function")) c.activation = p.getString("activation_function");
  }
  // What the configs derive.
  if (c.num_key_value_heads == 0 || family == Family::kGpt2) c.num_key_value_heads = c.num_attention_heads;
  if (family == Family::kGpt2 && c.intermediate_size == 0) c.intermediate_size = 4 * c.hidden_size;
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
  check(family == Family::kGpt2 || c.head_dim % 2 == 0,
        fmt::format("head_dim {} must be even for rotary embeddings", c.head_dim));
  static const std::set<std::string> kActivations{"gelu_new", "gelu_pytorch_tanh", "gelu", "relu", "silu", "swish"};
  check(family == Family::kLlama || kActivations.count(c.activation),
        "activation_function '" + c.activation + "' is not one of gelu_new, gelu_pytorch_tanh, gelu, relu, silu");
  return c;
}

}  // namespace hpu::core::models
