// The decoder-only families built like Llama, each in Hugging Face's module
// layout and names: model.embed_tokens, model.layers.N.{input_layernorm,
// self_attn, post_attention_layernorm, mlp}, model.norm, lm_head (or the
// embedding's weight, tied). The math is Hugging Face's: RMSNorm, rotary
// embeddings in the rotate-half layout, grouped-query attention, a gated MLP.
// What each family changes:
//  - Llama, Mistral (LlamaForCausalLM): optional biases, a sliding window
//    (Mistral);
//  - Qwen2: biases on q, k and v (none on o_proj), a window on the layers
//    from max_window_layers on;
//  - Gemma: RMSNorm scaling by (1 + weight), embeddings times
//    sqrt(hidden_size), a GeGLU MLP (gelu_pytorch_tanh), head_dim of its own;
//  - Gemma 2: Gemma's, plus norms after attention and around the MLP
//    (pre_feedforward_layernorm, post_feedforward_layernorm), scores scaled
//    by query_pre_attn_scalar^-0.5 and soft-capped, alternating sliding
//    window layers, soft-capped logits;
//  - Phi-3: q, k, v in one qkv_proj and gate, up in one gate_up_proj, as its
//    checkpoints store them; dropout on each residual branch;
//  - Mixtral: a sparse mixture of experts (block_sparse_moe, sparse_moe.h)
//    in place of the MLP.
#include <cmath>

#include "hpu/core/config/registry.h"
#include "hpu/core/models/causal_lm.h"
#include "hpu/core/nn/layers.h"
#include "hpu/core/nn/module_list.h"
#include "hpu/device/numerics.h"
#include "sparse_moe.h"

namespace hpu::core::models {
namespace {

using config::Type;

std::string prefixed(const TransformerConfig& c, const char* part) { return c.info().module_prefix + std::string(part); }

class DecoderAttention final : public nn::SelfAttention {
 public:
  DecoderAttention(nn::InitContext& ctx, const TransformerConfig& c, std::int64_t layer)
      : SelfAttention(ctx, {.hidden_size = c.hidden_size,
                            .num_heads = c.num_attention_heads,
                            .num_key_value_heads = c.num_key_value_heads,
                            .head_dim = c.head_dim,
                            .bias = c.qkv_bias,
                            .output_bias = c.output_bias,
                            .fused_qkv = c.family == Family::kPhi3,
                            .scale = c.query_pre_attn_scalar > 0
                                         ? std::optional<float>(static_cast<float>(std::pow(c.query_pre_attn_scalar, -0.5)))
                                         : std::nullopt,
                            .softcap = static_cast<float>(c.attn_logit_softcapping),
                            .rope_theta = static_cast<float>(c.rope_theta),
                            .rope_scaling = c.rope_scaling,
                            .causal = true,
                            .sliding_window = c.slidingWindowOf(layer),
                            .dropout = static_cast<float>(c.attention_dropout),
                            .cache_layer = layer,
                            .eager = c.eager_attention,
                            .recompute = c.recompute_attention,
                            .tensor_parallel = ctx.tensor_parallel}),
        name_(prefixed(c, "Attention")) {}
  std::string typeName() const override { return name_; }

 private:
  std::string name_;
};

// The gated MLP: down(act(gate(x)) * up(x)), act silu (SwiGLU), or gelu
// exact or in its tanh approximation (GeGLU); Phi-3 holds gate and up as
// one gate_up_proj.
// Tensor parallel: gate and up column-parallel, down row-parallel.
class DecoderMLP final : public nn::Module {
 public:
  DecoderMLP(nn::InitContext& ctx, const TransformerConfig& c)
      : tp_(ctx.tensor_parallel), act_(c.hidden_act), name_(prefixed(c, "MLP")) {
    const std::int64_t h = c.hidden_size, i = c.intermediate_size;
    nn::LinearParallel column = nn::splitAcross(tp_, nn::ParallelSplit::kColumn);
    if (c.family == Family::kPhi3) {
      if (tp_ != nullptr) column.blocks = 2;
      gate_up_proj = registerChild("gate_up_proj", std::make_shared<nn::Linear>(ctx, h, 2 * i, c.mlp_bias, column));
    } else {
      gate_proj = registerChild("gate_proj", std::make_shared<nn::Linear>(ctx, h, i, c.mlp_bias, column));
      up_proj = registerChild("up_proj", std::make_shared<nn::Linear>(ctx, h, i, c.mlp_bias, column));
    }
    down_proj = registerChild("down_proj", std::make_shared<nn::Linear>(ctx, i, h, c.mlp_bias,
                                                                        nn::splitAcross(tp_, nn::ParallelSplit::kRow)));
  }
  std::string typeName() const override { return name_; }
  Tensor forward(const Tensor& input) override {
    const Tensor x = tp_ ? ops::toParallelRegion(input, *tp_) : input;
    Tensor gate, up;
    if (gate_up_proj) {
      const Tensor both = gate_up_proj(x);
      const std::int64_t half = both.size(-1) / 2, sizes[] = {half, half};
      std::vector<Tensor> pieces = ops::split(both, sizes);
      gate = std::move(pieces[0]), up = std::move(pieces[1]);
    } else {
      gate = gate_proj(x), up = up_proj(x);
    }
    // The projections are freed once combined (outside autograd), as in eager PyTorch.
    const Tensor hidden =
        act_ == "silu" ? ops::swiglu(std::move(gate), up) : ops::mul(ops::gelu(gate, act_ == "gelu_pytorch_tanh"), up);
    return down_proj(hidden);
  }
  nn::Child<nn::Linear> gate_proj, up_proj, gate_up_proj, down_proj;

 private:
  ops::ParallelGroup* tp_;
  std::string act_;
  std::string name_;
};

class DecoderLayer final : public nn::Module {
 public:
  DecoderLayer(nn::InitContext& ctx, const TransformerConfig& c, std::int64_t layer,
               const std::shared_ptr<RouterBalance>& balance)
      : c_(c), tp_(ctx.tensor_parallel), dropout_rng_(&ctx.dropout_rng), name_(prefixed(c, "DecoderLayer")) {
    const auto norm = [&] {
      return std::make_shared<nn::RMSNorm>(ctx, c.hidden_size, static_cast<float>(c.norm_eps), c.norm_unit_offset);
    };
    input_layernorm = registerChild("input_layernorm", norm());
    self_attn = registerChild("self_attn", std::make_shared<DecoderAttention>(ctx, c, layer));
    post_attention_layernorm = registerChild("post_attention_layernorm", norm());
    if (c.family == Family::kGemma2) {
      pre_feedforward_layernorm = registerChild("pre_feedforward_layernorm", norm());
      post_feedforward_layernorm = registerChild("post_feedforward_layernorm", norm());
    }
    if (c.num_local_experts > 0)
      mlp = registerChild("block_sparse_moe", std::make_shared<SparseMoeBlock>(ctx, c, layer, balance));
    else
      mlp = registerChild("mlp", std::make_shared<DecoderMLP>(ctx, c));
  }
  std::string typeName() const override { return name_; }
  using Module::forward;
  Tensor forward(const nn::Inputs& in) override {
    const Tensor& x = in.tensors["hidden_states"];
    Tensor attended = self_attn(nn::Inputs{{{"hidden_states", input_layernorm(x)}, {"position_ids", in.tensors["position_ids"]}},
                                           in.kv_cache});  // the normalised input is freed here, before the MLP
    if (c_.family == Family::kGemma2) {
      // Gemma 2: each branch normalised before and after.
      const Tensor h = ops::add(x, post_attention_layernorm(attended));
      return ops::add(h, post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h))));
    }
    const Tensor h = ops::add(x, residualDropout(std::move(attended)));
    return ops::add(h, residualDropout(mlp(post_attention_layernorm(h))));
  }
  nn::Child<nn::RMSNorm> input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
      post_feedforward_layernorm;
  nn::Child<DecoderAttention> self_attn;
  nn::Child<nn::Module> mlp;

 private:
  // Phi-3's resid_pdrop on a residual branch (other families: none).
  Tensor residualDropout(Tensor y) const {
    if (c_.resid_dropout == 0.0f) return y;
    return ops::dropout(y, c_.resid_dropout, training(), *dropout_rng_,
                        tp_ ? ops::sequencePartOf(y, *tp_) : ops::SequencePart{});
  }
  const TransformerConfig& c_;
  ops::ParallelGroup* tp_;
  Generator* dropout_rng_;
  std::string name_;
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

// Hugging Face's LlamaModel (Qwen2Model, ...), or the part of it a pipeline stage holds.
class DecoderModel final : public nn::Module {
 public:
  DecoderModel(nn::InitContext& ctx, const TransformerConfig& c, const CausalLM::StagePart& part, bool embeds,
               const nn::VocabularyRows& vocabulary, const std::shared_ptr<RouterBalance>& balance)
      : name_(prefixed(c, "Model")) {
    if (embeds) {
      CausalLM::PartInit at(ctx, CausalLM::InitPart::kEmbeddings);
      embed_tokens = registerChild(
          "embed_tokens", std::make_shared<nn::Embedding>(at.ctx, c.vocab_size, c.hidden_size, c.pad_token_id,
                                                          static_cast<float>(c.initializer_range), vocabulary));
    }
    layers = registerChild("layers", std::make_shared<nn::ModuleList>());
    for (const std::int64_t l : part.layers()) {
      CausalLM::PartInit at(ctx, CausalLM::InitPart::kLayer, l);
      auto layer = layers->append(std::make_shared<DecoderLayer>(at.ctx, c, l, balance), l);
      // Hugging Face's _init_weights: every weight matrix N(0,
      // initializer_range), biases zero; norms keep theirs; a sparse MoE
      // block draws its experts and router itself.
      for (const nn::NamedTensor& p : layer->namedParameters()) {
        if (p.name.starts_with("block_sparse_moe.")) continue;
        if (p.tensor.ndim() == 2) nn::fillNormal(at.ctx, p.tensor, static_cast<float>(c.initializer_range), p.shard);
        if (p.name.ends_with(".bias")) nn::fillConstant(p.tensor, 0.0f);
      }
    }
    if (part.last)
      norm = registerChild("norm", std::make_shared<nn::RMSNorm>(ctx, c.hidden_size, static_cast<float>(c.norm_eps),
                                                                 c.norm_unit_offset));
  }
  std::string typeName() const override { return name_; }
  nn::Child<nn::Embedding> embed_tokens;
  nn::Child<nn::ModuleList> layers;
  nn::Child<nn::RMSNorm> norm;

 private:
  std::string name_;
};

class DecoderForCausalLM final : public CausalLM {
 public:
  DecoderForCausalLM(Family family, const config::Params& p) : CausalLM(family, p) {
    if (config_.num_local_experts > 0)
      balance_ = std::make_shared<RouterBalance>(config_.num_local_experts, config_.num_experts_per_tok);
  }
  std::string typeName() const override { return config_.info().model_class; }

 protected:
  void build(nn::InitContext& ctx) override {
    // The last stage keeps a copy of a tied embedding matrix for its head.
    const bool tied = config_.tie_word_embeddings;
    model_ = registerChild("model", std::make_shared<DecoderModel>(ctx, config_, stage_,
                                                                   stage_.first || (stage_.last && tied), vocabulary_,
                                                                   balance_));
    // Gemma multiplies the embeddings by sqrt(hidden_size) in the weights' dtype.
    if (config_.scale_embeddings)
      embedding_scale_ = device::roundTo(std::sqrt(static_cast<float>(config_.hidden_size)), ctx.param_dtype);
    if (!stage_.last) return;
    if (tied) {
      lm_head_ = registerChild("lm_head", std::make_shared<TiedHead>(model_->embed_tokens->weight));
      return;
    }
    PartInit at(ctx, InitPart::kHead);
    lm_head_ = registerChild("lm_head", std::make_shared<nn::Linear>(
                                            at.ctx, config_.hidden_size, config_.vocab_size, false, vocabulary_.linear()));
    for (const nn::NamedTensor& p : lm_head_->namedParameters())
      nn::fillNormal(at.ctx, p.tensor, static_cast<float>(config_.initializer_range), p.shard);
  }
  Tensor embed(const Tensor& ids, const Tensor&) override {
    Tensor h = model_->embed_tokens(ids);
    if (embedding_scale_ != 1.0f) h = ops::scale(h, embedding_scale_);
    return toSequenceParallel(h);
  }
  Tensor tiedEmbedding() const override { return config_.tie_word_embeddings ? model_->embed_tokens->weight : Tensor(); }
  nn::ModuleList& decoderLayers() override { return *model_->layers; }
  Tensor head(const Tensor& hidden, const nn::KVCache* cache) override {
    const Tensor logits = lm_head_(toVocabParallel(model_->norm(statesToPredict(hidden, cache))));
    if (config_.final_logit_softcapping > 0) return ops::softcap(logits, static_cast<float>(config_.final_logit_softcapping));
    return logits;
  }
  Tensor addAuxiliaryLosses(const Tensor& loss) const override {
    if (!balance_ || !config_.output_router_logits) return loss;
    return balance_->addTo(loss, config_.router_aux_loss_coef);
  }

 private:
  nn::Child<DecoderModel> model_;
  nn::Child<nn::Module> lm_head_;
  std::shared_ptr<RouterBalance> balance_;  // Mixtral's routing statistics, for the load-balancing loss
  float embedding_scale_ = 1.0f;
};

// init_args of every family built here; those a family does not have are
// refused by its schema (Mixtral's expert counts on a Llama).
std::vector<config::ParamSpec> decoderParams(Family family) {
  const Type count = Type::optional(Type::integer().min(1));
  std::vector<config::ParamSpec> params{
      {"vocab_size", count, "null", "Tokens in the vocabulary (default: config.json's, else the data's tokenizer's)."},
      {"hidden_size", count, "null", "Width of the residual stream (default: the family's config class's)."},
      {"intermediate_size", count, "null", "Width of the MLP (of each expert, Mixtral)."},
      {"num_hidden_layers", count, "null", "Decoder layers."},
      {"num_attention_heads", count, "null", "Query heads."},
      {"num_key_value_heads", count, "null",
       "Key/value heads: fewer than the query heads is grouped-query attention."},
      {"head_dim", count, "null", "Width of each head (default: hidden_size / num_attention_heads; Gemma: 256)."},
      {"max_position_embeddings", count, "null", "Longest sequence, generation included."},
      {"rms_norm_eps", Type::optional(Type::real().min(0.0, true)), "null", "RMSNorm's epsilon."},
      {"rope_theta", Type::optional(Type::real().min(0.0, true)), "null", "Rotary embeddings' base."},
      {"tie_word_embeddings", Type::optional(Type::boolean()), "null",
       "Use the input embedding as the output projection (default: the family's; Gemma: true)."},
      {"attention_dropout", Type::optional(Type::real().min(0.0).max(1.0, true)), "null",
       "Dropout on attention probabilities in training (default 0)."},
      {"initializer_range", Type::optional(Type::real().min(0.0)), "null",
       "Standard deviation of the initial weights (default 0.02)."},
  };
  if (family == Family::kMixtral) {
    params.push_back({"num_local_experts", count, "null", "Experts in each sparse MoE block (default 8)."});
    params.push_back({"num_experts_per_tok", count, "null", "Experts each token is routed to (default 2)."});
    params.push_back({"output_router_logits", Type::optional(Type::boolean()), "null",
                      "Add the router's load-balancing loss (Switch Transformer's) to the loss (default false)."});
    params.push_back({"router_aux_loss_coef", Type::optional(Type::real().min(0.0)), "null",
                      "Weight of the load-balancing loss (default 0.001)."});
  }
  for (auto& p : causalLMParams()) params.push_back(std::move(p));
  return params;
}

std::unique_ptr<CausalLM> makeDecoder(Family family, const config::Params& p) {
  return std::make_unique<DecoderForCausalLM>(family, p);
}

// Registered by class name under transformers (transformers.Qwen2ForCausalLM).
config::ComponentRegistration<LightningModule> registerFamily(Family family, const char* doc,
                                                              std::vector<std::string> stands_in_for = {}) {
  const FamilyInfo& info = familyInfo(family);
  return {config::ComponentSchema{config::ComponentKind::kModel,
                                  info.model_class,
                                  "transformers",
                                  {info.model_class, "", decoderParams(family)},
                                  doc,
                                  std::move(stands_in_for)},
          [family](const config::Params& p) -> std::unique_ptr<LightningModule> { return makeDecoder(family, p); }};
}

const auto kLlama = registerFamily(Family::kLlama,
                                   "Llama / Mistral decoder-only language model (Hugging Face's math and names; "
                                   "config: a config.json).",
                                   {"transformers.MistralForCausalLM"});
const auto kQwen2 = registerFamily(Family::kQwen2, "Qwen2 decoder-only language model (Hugging Face's math and names).");
const auto kGemma = registerFamily(Family::kGemma, "Gemma decoder-only language model (Hugging Face's math and names).");
const auto kGemma2 =
    registerFamily(Family::kGemma2, "Gemma 2 decoder-only language model (Hugging Face's math and names).");
const auto kPhi3 = registerFamily(Family::kPhi3, "Phi-3 decoder-only language model (Hugging Face's math and names).");
const auto kMixtral = registerFamily(
    Family::kMixtral, "Mixtral sparse mixture-of-experts language model (Hugging Face's math and names).");

}  // namespace

std::unique_ptr<CausalLM> makeCausalLM(Family family, const config::Params& p) {
  if (family == Family::kGpt2) return makeGpt2LMHeadModel(p);
  return makeDecoder(family, p);
}

}  // namespace hpu::core::models
