// GPT2LMHeadModel: Hugging Face's GPT-2 in its module layout and names:
// transformer.wte, transformer.wpe, transformer.h.N.{ln_1, attn.c_attn,
// attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}, transformer.ln_f, and lm_head
// tied to wte. Its linear layers are Conv1D (weights stored [in, out]), the
// MLP's activation gelu_new (the tanh approximation), with dropout after the
// embeddings, on the attention probabilities and on each residual branch.
#include "hpu/core/config/registry.h"
#include "hpu/core/models/causal_lm.h"
#include "hpu/core/nn/layers.h"
#include "hpu/core/nn/module_list.h"

namespace hpu::core::models {
namespace {

using config::Type;

Tensor activate(const std::string& name, const Tensor& x) {
  if (name == "gelu") return ops::gelu(x, false);
  if (name == "relu") return ops::relu(x);
  if (name == "silu" || name == "swish") return ops::silu(x);
  return ops::gelu(x, true);  // gelu_new, gelu_pytorch_tanh
}

class GPT2Attention final : public nn::Module {
 public:
  // Tensor parallel: c_attn column-parallel in three blocks (each rank its
  // heads' q, k and v), c_proj row-parallel.
  GPT2Attention(nn::InitContext& ctx, const TransformerConfig& c, std::int64_t layer, Generator& dropout_rng)
      : c_(c),
        layer_(layer),
        tp_(ctx.tensor_parallel),
        heads_(tp_ ? nn::localHeads(c.num_attention_heads, c.num_attention_heads, tp_->size()).heads
                   : c.num_attention_heads),
        dropout_rng_(&dropout_rng) {
    nn::LinearParallel qkv = nn::splitAcross(tp_, nn::ParallelSplit::kColumn);
    qkv.blocks = 3;
    c_attn = registerChild("c_attn", std::make_shared<nn::Conv1D>(ctx, c.hidden_size, 3 * c.hidden_size, 0.02f, qkv));
    c_proj = registerChild("c_proj", std::make_shared<nn::Conv1D>(ctx, c.hidden_size, c.hidden_size, 0.02f,
                                                                  nn::splitAcross(tp_, nn::ParallelSplit::kRow)));
  }
  std::string typeName() const override { return "GPT2Attention"; }
  using Module::forward;
  Tensor forward(const nn::Inputs& in) override {
    const Tensor& hidden = in.tensors["hidden_states"];
    const Tensor x = tp_ ? ops::toParallelRegion(hidden, *tp_) : hidden;
    const std::int64_t n = heads_ * (c_.hidden_size / c_.num_attention_heads), sizes[] = {n, n, n};
    const std::vector<Tensor> qkv = ops::split(c_attn(x), sizes);
    const Tensor q = ops::splitHeads(qkv[0], heads_);
    Tensor k = ops::splitHeads(qkv[1], heads_), v = ops::splitHeads(qkv[2], heads_);
    ops::AttentionOptions o{.causal = true, .eager = c_.eager_attention};
    if (in.kv_cache != nullptr) {
      std::tie(k, v) = in.kv_cache->append(layer_, k, v);
      o.kv_length = in.kv_cache->length() + x.size(1);
      o.kv_graph_length = in.kv_cache->attendedRows(layer_, o.kv_length);
    }
    o.dropout_p = c_.attention_dropout;
    if (tp_) {
      o.head_offset = heads_ * tp_->rank();
      o.all_heads = c_.num_attention_heads;
    }
    o.training = training();
    o.rng = dropout_rng_;
    const Tensor y = c_proj(ops::mergeHeads(nn::attentionCore(q, k, v, o, c_.recompute_attention)));
    return ops::dropout(y, c_.resid_dropout, training(), *dropout_rng_, tp_ ? ops::sequencePartOf(y, *tp_) : ops::SequencePart{});
  }
  nn::Child<nn::Conv1D> c_attn, c_proj;

 private:
  const TransformerConfig& c_;
  std::int64_t layer_;
  ops::ParallelGroup* tp_;
  std::int64_t heads_;  // on this rank
  Generator* dropout_rng_;
};

class GPT2MLP final : public nn::Module {
 public:
  GPT2MLP(nn::InitContext& ctx, const TransformerConfig& c, Generator& dropout_rng)
      : c_(c), tp_(ctx.tensor_parallel), dropout_rng_(&dropout_rng) {
    c_fc = registerChild("c_fc", std::make_shared<nn::Conv1D>(ctx, c.hidden_size, c.intermediate_size, 0.02f,
                                                              nn::splitAcross(tp_, nn::ParallelSplit::kColumn)));
    c_proj = registerChild("c_proj", std::make_shared<nn::Conv1D>(ctx, c.intermediate_size, c.hidden_size, 0.02f,
                                                                  nn::splitAcross(tp_, nn::ParallelSplit::kRow)));
  }
  std::string typeName() const override { return "GPT2MLP"; }
  Tensor forward(const Tensor& input) override {
    const Tensor x = tp_ ? ops::toParallelRegion(input, *tp_) : input;
    const Tensor hidden = activate(c_.activation, c_fc(x));  // c_fc's output is freed here (outside autograd)
    const Tensor y = c_proj(hidden);
    return ops::dropout(y, c_.resid_dropout, training(), *dropout_rng_, tp_ ? ops::sequencePartOf(y, *tp_) : ops::SequencePart{});
  }
  nn::Child<nn::Conv1D> c_fc, c_proj;

 private:
  const TransformerConfig& c_;
  ops::ParallelGroup* tp_;
  Generator* dropout_rng_;
};

class GPT2Block final : public nn::Module {
 public:
  GPT2Block(nn::InitContext& ctx, const TransformerConfig& c, std::int64_t layer, Generator& dropout_rng) {
    const auto eps = static_cast<float>(c.norm_eps);
    ln_1 = registerChild("ln_1", std::make_shared<nn::LayerNorm>(ctx, c.hidden_size, eps));
    attn = registerChild("attn", std::make_shared<GPT2Attention>(ctx, c, layer, dropout_rng));
    ln_2 = registerChild("ln_2", std::make_shared<nn::LayerNorm>(ctx, c.hidden_size, eps));
    mlp = registerChild("mlp", std::make_shared<GPT2MLP>(ctx, c, dropout_rng));
  }
  std::string typeName() const override { return "GPT2Block"; }
  using Module::forward;
  Tensor forward(const nn::Inputs& in) override {
    const Tensor& x = in.tensors["hidden_states"];
    const Tensor h = ops::add(
        x, attn(nn::Inputs{{{"hidden_states", ln_1(x)}, {"position_ids", in.tensors["position_ids"]}}, in.kv_cache}));
    return ops::add(h, mlp(ln_2(h)));
  }
  nn::Child<nn::LayerNorm> ln_1, ln_2;
  nn::Child<GPT2Attention> attn;
  nn::Child<GPT2MLP> mlp;
};

// Hugging Face's GPT2Model, or the part of it a pipeline stage holds.
class GPT2Model final : public nn::Module {
 public:
  GPT2Model(nn::InitContext& ctx, const TransformerConfig& c, const CausalLM::StagePart& part, bool token_embedding,
            const nn::VocabularyRows& vocabulary, Generator& dropout_rng) {
    const auto std = static_cast<float>(c.initializer_range);
    CausalLM::PartInit embeddings(ctx, CausalLM::InitPart::kEmbeddings);
    if (token_embedding)
      wte = registerChild("wte", std::make_shared<nn::Embedding>(embeddings.ctx, c.vocab_size, c.hidden_size, std::nullopt,
                                                                 std, vocabulary));
    if (part.first)
      wpe = registerChild("wpe", std::make_shared<nn::Embedding>(embeddings.ctx, c.max_position_embeddings, c.hidden_size,
                                                                 std::nullopt, std));
    h = registerChild("h", std::make_shared<nn::ModuleList>());
    // Hugging Face's _init_weights: the residual projections scaled by 1 / sqrt(2 n_layer).
    const float residual_std =
        static_cast<float>(c.initializer_range / std::sqrt(2.0 * static_cast<double>(c.num_hidden_layers)));
    for (const std::int64_t l : part.layers()) {
      CausalLM::PartInit at(ctx, CausalLM::InitPart::kLayer, l);
      auto block = h->append(std::make_shared<GPT2Block>(at.ctx, c, l, dropout_rng), l);
      for (const nn::NamedTensor& p : block->namedParameters())
        if (p.name.ends_with("c_proj.weight")) nn::fillNormal(at.ctx, p.tensor, residual_std, p.shard);
    }
    if (part.last)
      ln_f = registerChild("ln_f", std::make_shared<nn::LayerNorm>(ctx, c.hidden_size, static_cast<float>(c.norm_eps)));
  }
  std::string typeName() const override { return "GPT2Model"; }
  nn::Child<nn::Embedding> wte, wpe;
  nn::Child<nn::ModuleList> h;
  nn::Child<nn::LayerNorm> ln_f;
};

// lm_head: the token embedding as the output projection (GPT-2 ties them),
// or a linear layer of its own shaped, padded and split as the embedding;
// under tensor parallelism, this rank's vocabulary rows of either.
class LMHead final : public nn::Module {
 public:
  // Tied to `wte`.
  explicit LMHead(const nn::Embedding& wte) : weight_(wte.weight) { useParameter(weight_); }
  // Its own [vocab, hidden] weight.
  LMHead(nn::InitContext& ctx, const TransformerConfig& c, const nn::VocabularyRows& vocabulary) {
    const Shard shard = vocabulary.shard(c.vocab_size);
    weight_ = registerParameter("weight",
                                nn::normalInit(ctx, {vocabulary.localRows(c.vocab_size), c.hidden_size},
                                               static_cast<float>(c.initializer_range), shard),
                                shard);
  }
  std::string typeName() const override { return "Linear"; }
  std::string describe() const override { return ownParameters().empty() ? "tied to transformer.wte" : ""; }
  Tensor forward(const Tensor& x) override { return ops::linear(x, weight_, Tensor()); }

 private:
  Tensor weight_;
};

class GPT2LMHeadModel final : public CausalLM {
 public:
  explicit GPT2LMHeadModel(const config::Params& p) : CausalLM(Family::kGpt2, p) {}
  std::string typeName() const override { return "GPT2LMHeadModel"; }

 protected:
  void build(nn::InitContext& ctx) override {
    // The last stage keeps a copy of the tied token embedding for its head.
    const bool tied = config_.tie_word_embeddings;
    transformer_ = registerChild("transformer", std::make_shared<GPT2Model>(ctx, config_, stage_,
                                                                            stage_.first || (stage_.last && tied),
                                                                            vocabulary_, *dropout_rng_));
    if (!stage_.last) return;
    if (tied) {
      lm_head_ = registerChild("lm_head", std::make_shared<LMHead>(*transformer_->wte));
      return;
    }
    PartInit at(ctx, InitPart::kHead);
    lm_head_ = registerChild("lm_head", std::make_shared<LMHead>(at.ctx, config_, vocabulary_));
  }
  Tensor embed(const Tensor& ids, const Tensor& positions) override {
    // Positions broadcast over the batch: one row of position embeddings per sample.
    const std::int64_t batch = ids.size(0), len = ids.size(1);
    std::vector<std::int64_t> pos(static_cast<std::size_t>(batch * len));
    if (!positions.shapeOnly())
      for (std::int64_t b = 0; b < batch; ++b) std::copy_n(positions.labels(), len, pos.begin() + b * len);
    const Tensor pos_ids = Tensor::fromHost(ids.device(), {batch, len}, pos);
    const Tensor h = ops::add(transformer_->wte(ids), transformer_->wpe(pos_ids));
    return toSequenceParallel(ops::dropout(h, config_.embd_dropout, training(), *dropout_rng_));
  }
  Tensor tiedEmbedding() const override { return config_.tie_word_embeddings ? transformer_->wte->weight : Tensor(); }
  nn::ModuleList& decoderLayers() override { return *transformer_->h; }
  Tensor head(const Tensor& hidden, const nn::KVCache* cache) override {
    return lm_head_(toVocabParallel(transformer_->ln_f(statesToPredict(hidden, cache))));
  }

 private:
  nn::Child<GPT2Model> transformer_;
  nn::Child<LMHead> lm_head_;
};

std::vector<config::ParamSpec> gpt2Params() {
  const Type count = Type::optional(Type::integer().min(1));
  const Type probability = Type::optional(Type::real().min(0.0).max(1.0, true));
  std::vector<config::ParamSpec> params{
      {"vocab_size", count, "null", "Tokens in the vocabulary (default: config.json's, else the data's tokenizer's)."},
      {"n_positions", count, "null", "Longest sequence, generation included (GPT2Config's default: 1024)."},
      {"n_embd", count, "null", "Width of the residual stream (default 768)."},
      {"n_layer", count, "null", "Transformer blocks (default 12)."},
      {"n_head", count, "null", "Attention heads (default 12)."},
      {"n_inner", count, "null", "Width of the MLP (default 4 x n_embd)."},
      {"activation_function", Type::optional(Type::string({"gelu_new", "gelu_pytorch_tanh", "gelu", "relu", "silu"})),
       "null", "The MLP's activation (default gelu_new, the tanh approximation)."},
      {"layer_norm_epsilon", Type::optional(Type::real().min(0.0, true)), "null",
       "LayerNorm's epsilon (default 1e-5)."},
      {"resid_pdrop", probability, "null", "Dropout on each residual branch in training (default 0.1)."},
      {"embd_pdrop", probability, "null", "Dropout on the embeddings in training (default 0.1)."},
      {"attn_pdrop", probability, "null", "Dropout on attention probabilities in training (default 0.1)."},
      {"tie_word_embeddings", Type::optional(Type::boolean()), "null",
       "Use the token embedding as the output projection (default true)."},
      {"initializer_range", Type::optional(Type::real().min(0.0)), "null",
       "Standard deviation of the initial weights (default 0.02)."},
  };
  for (auto& p : causalLMParams()) params.push_back(std::move(p));
  return params;
}

HPU_REGISTER_COMPONENT(LightningModule,
                       config::ComponentSchema{config::ComponentKind::kModel,
                                               "GPT2LMHeadModel",
                                               "transformers",
                                               {"GPT2LMHeadModel", "", gpt2Params()},
                                               "GPT-2 decoder-only language model (Hugging Face's math and names; "
                                               "config: a config.json)."},
                       [](const config::Params& p) { return std::make_unique<GPT2LMHeadModel>(p); });

}  // namespace

std::unique_ptr<CausalLM> makeGpt2LMHeadModel(const config::Params& p) { return std::make_unique<GPT2LMHeadModel>(p); }

}  // namespace hpu::core::models
