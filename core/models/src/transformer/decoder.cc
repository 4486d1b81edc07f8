// LlamaForCausalLM: Hugging Face's Llama (and Mistral) in its module layout
// and names: model.embed_tokens, model.layers.N.{input_layernorm,
// self_attn.{q,k,v,o}_proj, post_attention_layernorm,
// mlp.{gate,up,down}_proj}, model.norm, lm_head (or the embedding's weight,
// tied). The math is Hugging Face's: LlamaRMSNorm, rotary embeddings in the
// rotate-half layout, grouped-query attention (each key/value head serves
// heads / kv_heads query heads), a SwiGLU MLP, an optional sliding window
// (Mistral).
#include "hpu/core/config/registry.h"
#include "hpu/core/models/causal_lm.h"
#include "hpu/core/nn/layers.h"
#include "hpu/core/nn/module_list.h"

namespace hpu::core::models {
namespace {

using config::Type;

// Hugging Face's LlamaAttention is nn::SelfAttention with rotary embeddings.
class LlamaAttention final : public nn::SelfAttention {
 public:
  LlamaAttention(nn::InitContext& ctx, const TransformerConfig& c, std::int64_t layer)
      : SelfAttention(ctx, {.hidden_size = c.hidden_size,
                            .num_heads = c.num_attention_heads,
                            .num_key_value_heads = c.num_key_value_heads,
                            .head_dim = c.head_dim,
                            .bias = c.attention_bias,
                            .rope_theta = static_cast<float>(c.rope_theta),
                            .rope_scaling = c.rope_scaling,
                            .causal = true,
                            .sliding_window = c.sliding_window,
                            .dropout = static_cast<float>(c.attention_dropout),
                            .cache_layer = layer,
                            .eager = c.eager_attention,
                            .recompute = c.recompute_attention,
                            .tensor_parallel = ctx.tensor_parallel}) {}
  std::string typeName() const override { return "LlamaAttention"; }
};

class LlamaMLP final : public nn::Module {
 public:
  // Tensor parallel: gate and up column-parallel, down row-parallel.
  LlamaMLP(nn::InitContext& ctx, const TransformerConfig& c) : tp_(ctx.tensor_parallel) {
    const nn::LinearParallel column = nn::splitAcross(tp_, nn::ParallelSplit::kColumn);
    gate_proj = registerChild(
        "gate_proj", std::make_shared<nn::Linear>(ctx, c.hidden_size, c.intermediate_size, c.mlp_bias, column));
    up_proj = registerChild("up_proj",
                            std::make_shared<nn::Linear>(ctx, c.hidden_size, c.intermediate_size, c.mlp_bias, column));
    down_proj = registerChild("down_proj",
                              std::make_shared<nn::Linear>(ctx, c.intermediate_size, c.hidden_size, c.mlp_bias,
                                                           nn::splitAcross(tp_, nn::ParallelSplit::kRow)));
  }
  std::string typeName() const override { return "LlamaMLP"; }
  Tensor forward(const Tensor& input) override {
    const Tensor x = tp_ ? ops::toParallelRegion(input, *tp_) : input;
    // The projections are freed once combined (outside autograd), as in eager PyTorch.
    const Tensor hidden = ops::swiglu(gate_proj(x), up_proj(x));
    return down_proj(hidden);
  }
  nn::Child<nn::Linear> gate_proj, up_proj, down_proj;

 private:
  ops::ParallelGroup* tp_;
};

class LlamaDecoderLayer final : public nn::Module {
 public:
  LlamaDecoderLayer(nn::InitContext& ctx, const TransformerConfig& c, std::int64_t layer) {
    const auto eps = static_cast<float>(c.norm_eps);
    input_layernorm = registerChild("input_layernorm", std::make_shared<nn::RMSNorm>(ctx, c.hidden_size, eps));
    self_attn = registerChild("self_attn", std::make_shared<LlamaAttention>(ctx, c, layer));
    post_attention_layernorm =
        registerChild("post_attention_layernorm", std::make_shared<nn::RMSNorm>(ctx, c.hidden_size, eps));
    mlp = registerChild("mlp", std::make_shared<LlamaMLP>(ctx, c));
  }
  std::string typeName() const override { return "LlamaDecoderLayer"; }
  using Module::forward;
  Tensor forward(const nn::Inputs& in) override {
    const Tensor& x = in.tensors["hidden_states"];
    const Tensor h = ops::add(
        x, self_attn(nn::Inputs{{{"hidden_states", input_layernorm(x)}, {"position_ids", in.tensors["position_ids"]}},
                                in.kv_cache}));  // the normalised input is freed here, before the MLP
    return ops::add(h, mlp(post_attention_layernorm(h)));
  }
  nn::Child<nn::RMSNorm> input_layernorm, post_attention_layernorm;
  nn::Child<LlamaAttention> self_attn;
  nn::Child<LlamaMLP> mlp;
};

// The embedding matrix as the output projection (tie_word_embeddings): it
// reads the embedding's weight, which stays the embedding's parameter (this
// rank's vocabulary rows under tensor parallelism).
class TiedHead final : public nn::Module {
 public:
  explicit TiedHead(const Tensor& weight) : weight_(weight) { useParameter(weight); }
  std::string typeName() const override { return "TiedLinear"; }
  std::string describe() const override { return "the input embedding's weight"; }
  Tensor forward(const Tensor& x) override { return ops::linear(x, weight_, Tensor()); }

 private:
  Tensor weight_;
};

// Hugging Face's LlamaModel, or the part of it a pipeline stage holds.
class LlamaModel final : public nn::Module {
 public:
  LlamaModel(nn::InitContext& ctx, const TransformerConfig& c, const CausalLM::StagePart& part, bool embeds) {
    if (embeds) {
      CausalLM::PartInit at(ctx, CausalLM::InitPart::kEmbeddings);
      embed_tokens = registerChild(
          "embed_tokens", std::make_shared<nn::Embedding>(at.ctx, c.vocab_size, c.hidden_size, c.pad_token_id,
                                                          static_cast<float>(c.initializer_range), ctx.tensor_parallel));
    }
    layers = registerChild("layers", std::make_shared<nn::ModuleList>());
    for (std::int64_t l = part.first_layer; l < part.end_layer; ++l) {
      CausalLM::PartInit at(ctx, CausalLM::InitPart::kLayer, l);
      auto layer = layers->append(std::make_shared<LlamaDecoderLayer>(at.ctx, c, l), l);
      // Hugging Face's _init_weights: linear weights N(0, initializer_range), biases zero.
      for (const auto& [name, t, shard] : layer->namedParameters()) {
        if (name.ends_with("_proj.weight")) nn::fillNormal(at.ctx, t, static_cast<float>(c.initializer_range), shard);
        if (name.ends_with("_proj.bias")) nn::fillConstant(t, 0.0f);
      }
    }
    if (part.last)
      norm = registerChild("norm", std::make_shared<nn::RMSNorm>(ctx, c.hidden_size, static_cast<float>(c.norm_eps)));
  }
  std::string typeName() const override { return "LlamaModel"; }
  nn::Child<nn::Embedding> embed_tokens;
  nn::Child<nn::ModuleList> layers;
  nn::Child<nn::RMSNorm> norm;
};

class LlamaForCausalLM final : public CausalLM {
 public:
  explicit LlamaForCausalLM(const config::Params& p) : CausalLM(Family::kLlama, p) {}
  std::string typeName() const override { return "LlamaForCausalLM"; }

 protected:
  void build(nn::InitContext& ctx) override {
    // The last stage keeps a copy of a tied embedding matrix for its head.
    const bool tied = config_.tie_word_embeddings;
    model_ = registerChild("model", std::make_shared<LlamaModel>(ctx, config_, stage_, stage_.first || (stage_.last && tied)));
    if (!stage_.last) return;
    if (tied) {
      lm_head_ = registerChild("lm_head", std::make_shared<TiedHead>(model_->embed_tokens->weight));
      return;
    }
    PartInit at(ctx, InitPart::kHead);
    lm_head_ = registerChild("lm_head", std::make_shared<nn::Linear>(
                                            at.ctx, config_.hidden_size, config_.vocab_size, false,
                                            nn::splitAcross(ctx.tensor_parallel, nn::ParallelSplit::kColumn)));
    for (const auto& [name, t, shard] : lm_head_->namedParameters())
      nn::fillNormal(at.ctx, t, static_cast<float>(config_.initializer_range), shard);
  }
  Tensor embed(const Tensor& ids, const Tensor&) override { return toSequenceParallel(model_->embed_tokens(ids)); }
  Tensor tiedEmbedding() const override { return config_.tie_word_embeddings ? model_->embed_tokens->weight : Tensor(); }
  nn::ModuleList& decoderLayers() override { return *model_->layers; }
  Tensor head(const Tensor& hidden, const nn::KVCache* cache) override {
    return lm_head_(toVocabParallel(model_->norm(statesToPredict(hidden, cache))));
  }

 private:
  nn::Child<LlamaModel> model_;
  nn::Child<nn::Module> lm_head_;
};

std::vector<config::ParamSpec> llamaParams() {
  const Type count = Type::optional(Type::integer().min(1));
  std::vector<config::ParamSpec> params{
      {"vocab_size", count, "null", "Tokens in the vocabulary (default: config.json's, else the data's tokenizer's)."},
      {"hidden_size", count, "null", "Width of the residual stream (LlamaConfig's default: 4096)."},
      {"intermediate_size", count, "null", "Width of the MLP (default 11008)."},
      {"num_hidden_layers", count, "null", "Decoder layers (default 32)."},
      {"num_attention_heads", count, "null", "Query heads (default 32)."},
      {"num_key_value_heads", count, "null",
       "Key/value heads: fewer than the query heads is grouped-query attention "
       "(default: as many)."},
      {"max_position_embeddings", count, "null", "Longest sequence, generation included (default 2048)."},
      {"rms_norm_eps", Type::optional(Type::real().min(0.0, true)), "null", "RMSNorm's epsilon (default 1e-6)."},
      {"rope_theta", Type::optional(Type::real().min(0.0, true)), "null", "Rotary embeddings' base (default 10000)."},
      {"tie_word_embeddings", Type::optional(Type::boolean()), "null",
       "Use the input embedding as the output projection (default false)."},
      {"attention_dropout", Type::optional(Type::real().min(0.0).max(1.0, true)), "null",
       "Dropout on attention probabilities in training (default 0)."},
      {"initializer_range", Type::optional(Type::real().min(0.0)), "null",
       "Standard deviation of the initial weights (default 0.02)."},
  };
  for (auto& p : causalLMParams()) params.push_back(std::move(p));
  return params;
}

HPU_REGISTER_COMPONENT(LightningModule,
                       config::ComponentSchema{config::ComponentKind::kModel,
                                               "LlamaForCausalLM",
                                               "transformers",
                                               {"LlamaForCausalLM", "", llamaParams()},
                                               "Llama / Mistral decoder-only language model (Hugging Face's math and "
                                               "names; config: a config.json).",
                                               {"transformers.MistralForCausalLM"}},
                       [](const config::Params& p) { return std::make_unique<LlamaForCausalLM>(p); });

}  // namespace
}  // namespace hpu::core::models
