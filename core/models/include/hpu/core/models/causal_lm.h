// What the decoder-only language models (GPT2LMHeadModel, and the families
// built like Llama: LlamaForCausalLM, Qwen2ForCausalLM, GemmaForCausalLM,
// Gemma2ForCausalLM, Phi3ForCausalLM, MixtralForCausalLM) share as
// LightningModules:
//  - next-token cross-entropy: train_loss, val_loss, test_loss in nats per
//    token, and val_bpb / test_bpb (bits per byte) with a byte tokenizer;
//  - AdamW(lr, weight_decay, betas 0.9 / 0.95) by default;
//  - generation (predict) over the prompts of its init_args with a KV cache:
//    greedy by default, or sampled (temperature, top_k) from the run's seed;
//  - checkpoint tensors under their Hugging Face names;
//  - a pretrained Hugging Face directory (init_args pretrained): its
//    config.json, weights and, when the data brings none, tokenizer;
//  - LoRA (init_args lora, PEFT's LoraConfig; lora_path, a PEFT adapter);
//  - a padded vocabulary (init_args make_vocab_size_divisible_by, Megatron-LM's
//    option, 128 by default under tensor parallelism): the embedding and the
//    output head hold zero rows past the vocabulary, to a multiple of it x
//    the tensor-parallel size, so that any vocabulary splits; their logits
//    are left out of the loss and of generation, and checkpoints, exports
//    and pretrained files hold the unpadded tensors;
//  - export as a Hugging Face directory, or the adapters as PEFT's;
//  - pipeline parallelism: a stage holds a run of the decoder layers (with
//    virtual stages, several: its model chunks), the first also the
//    embeddings, the last the final norm and output head (and, tied, its own
//    copy of the embedding matrix).
// A family builds its network in Hugging Face's module layout (the part of
// it this rank holds) and computes embeddings and logits; this class drives
// them. Every part draws its initial values, and every decoder layer its
// dropout masks, from a stream of its own: a pipeline stage computes what
// one device computes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hpu/core/config/params.h"
#include "hpu/core/models/hf_directory.h"
#include "hpu/core/models/transformer_config.h"
#include "hpu/core/module/lightning_module.h"
#include "hpu/core/module/pipeline_module.h"
#include "hpu/core/nn/kv_cache.h"
#include "hpu/core/nn/lora.h"
#include "hpu/core/nn/module_list.h"
#include "hpu/core/nn/vocabulary_rows.h"
#include "hpu/core/ops/parallel.h"

namespace hpu::core::models {

struct GenerationOptions {
  std::int64_t max_new_tokens = 64;
  bool do_sample = false;  // false: greedy (Hugging Face generate's default)
  float temperature = 1.0f;
  std::int64_t top_k = 50;  // 0: all tokens
  // > 0: decoding attends to the KV cache in buckets of this many positions
  // (a graph per bucket, optimum-habana's --bucket_size --bucket_internal);
  // 0: to the whole cache, one graph.
  std::int64_t bucket_size = 0;
  // true: the KV cache is allocated whole, prompt + max_new_tokens rows,
  // before the prompt's forward (optimum-habana's --reuse_cache); false: at
  // the prompt's length for its forward, then padded to the whole length
  // (optimum-habana's default). The same tokens either way; the peak differs.
  bool reuse_cache = false;
};

class CausalLM : public LightningModule, public PipelineModule {
 public:
  CausalLM(Family family, const config::Params& init_args);

  void configureModel(nn::InitContext& ctx, const ModelInput& input) final;
  // Logits [B, T, vocab] (under tensor parallelism this rank's part of the
  // vocabulary, padded vocab / ranks) of inputs "input_ids" [B, T] (int64)
  // at positions "position_ids" [T] (default: after what the KV cache
  // holds). With a KV cache (generation) the last position's only, [B, 1,
  // vocab], as Hugging Face's generate computes them (logits_to_keep = 1).
  // With a padded vocabulary the columns of token ids from vocab_size on are
  // padding: they belong to no token (zero weights) and the loss and
  // generation leave them out.
  Tensor forward(const nn::Inputs& inputs) override;
  Tensor trainingStep(const Batch& batch, std::int64_t batch_idx) override;
  void validationStep(const Batch& batch, std::int64_t batch_idx) override;
  void testStep(const Batch& batch, std::int64_t batch_idx) override;
  Prediction predictStep(const Batch& batch, std::int64_t batch_idx) override;
  std::shared_ptr<const data::Dataset> predictData() override;
  OptimizerConfig configureOptimizers() override;
  std::string checkpointKey(const std::string& name) const override { return name; }
  // fp8 converts the attention and MLP projections, as Transformer Engine
  // recipes do; the output projection stays in its precision.
  std::set<std::string> modulesToNotConvert() const override { return {"lm_head"}; }
  // The decoder: every module but lm_head (Hugging Face's `model` or
  // `transformer`); a tied lm_head shares its embedding.
  std::vector<nn::Module*> backbone() override;
  bool fillDeferredParameter(const nn::NamedTensor& param, std::int64_t first, std::span<float> out) override;
  void deferredParametersFilled() override;
  bool setKVCacheDtype(DType dtype) override {
    kv_cache_dtype_ = dtype;
    return true;
  }

  // The tokens that continue `prompt`: at most max_new_tokens, fewer if the
  // end-of-text token comes. With `use_cache` false, every step recomputes
  // the whole sequence (the reference the cache must equal).
  std::vector<std::int64_t> generate(const std::vector<std::int64_t>& prompt, const GenerationOptions& options,
                                     Generator& rng, bool use_cache = true);
  const TransformerConfig& config() const { return config_; }

  // The part of the network this rank holds: runs [begin, end) of the
  // decoder layers, its model chunks in order (one without virtual stages);
  // the embeddings if `first`, the final norm and the output head if `last`
  // (everything without pipeline parallelism).
  struct LayerRun {
    std::int64_t begin = 0, end = 0;
    std::size_t local = 0;  // the index of layer `begin` among the rank's layers
  };
  struct StagePart {
    std::vector<LayerRun> chunks{LayerRun{}};
    bool first = true, last = true;
    // The rank's decoder layers (their indices in the model), chunk after chunk.
    std::vector<std::int64_t> layers() const;
  };
  // The streams initial values are drawn from: the embeddings', the output
  // head's, decoder layer `layer`'s, and (kExpert, with `layer` a
  // expertStream key) each expert's and router's of a sparse MoE layer, so
  // that an expert-parallel rank draws its experts as one device does.
  enum class InitPart { kEmbeddings, kHead, kLayer, kExpert };
  // The kExpert key of expert `expert` of decoder layer `layer` (-1: its router).
  static std::int64_t expertStream(std::int64_t layer, std::int64_t expert) { return (layer << 20) + expert + 1; }
  // `base` drawing from `part`'s own stream. Not copyable: `ctx` refers to `rng`.
  struct PartInit {
    PartInit(const nn::InitContext& base, InitPart part, std::int64_t layer = 0);
    PartInit(const PartInit&) = delete;
    PartInit& operator=(const PartInit&) = delete;
    Generator rng;
    nn::InitContext ctx;
  };

  StageInput stageInput(const Batch& batch) const override;
  int chunks() const override { return static_cast<int>(stage_.chunks.size()); }
  Tensor forwardStage(const Batch& batch, const Tensor& input, int chunk) override;
  void logLoss(std::string_view split, double loss) override;
  std::vector<Tensor> stageSharedParameters() const override;

  // Writes a Hugging Face model directory loadable by transformers'
  // from_pretrained: config.json, model.safetensors (sharded past 5 GB),
  // generation_config.json and the tokenizer's files. The weights written
  // have the LoRA adapters merged in (PEFT's merge_and_unload); the model
  // itself is unchanged.
  void exportPretrained(const std::string& dir) const;
  // Writes the LoRA adapters (and the modules_to_save, the trained biases)
  // as PEFT's save_pretrained does: adapter_config.json and
  // adapter_model.safetensors. Throws UsageError when the model has none.
  void saveAdapter(const std::string& dir) const;

 protected:
  // Registers the modules of `stage_` (Hugging Face's names and layout;
  // decoder layers under their numbers in the whole model), each part's
  // initial values drawn from its stream (PartInit).
  virtual void build(nn::InitContext& ctx) = 0;
  // The hidden states the first decoder layer reads: the embeddings of
  // `ids` [B, T] at `positions` [T] (under sequence parallelism this rank's
  // positions). REQUIRES: stage_.first.
  virtual Tensor embed(const Tensor& ids, const Tensor& positions) = 0;
  // The decoder layers this rank holds, in order.
  virtual nn::ModuleList& decoderLayers() = 0;
  // The embedding matrix the output head reads when tied (a parameter of
  // this rank), else undefined.
  virtual Tensor tiedEmbedding() const = 0;
  // The logits of the last layer's output `hidden`: [B, T, vocab], or with
  // `cache` (the decoding cache, or null) [B, 1, vocab] (see forward).
  // REQUIRES: stage_.last.
  virtual Tensor head(const Tensor& hidden, const nn::KVCache* cache) = 0;
  // The next-token loss `loss` with the family's auxiliary terms added
  // (Mixtral's load-balancing loss); by default `loss` itself.
  virtual Tensor addAuxiliaryLosses(const Tensor& loss) const { return loss; }

  // The final hidden states [B, T, hidden] whose logits forward returns:
  // all, or with a decoding cache the last position's.
  static Tensor statesToPredict(const Tensor& hidden, const nn::KVCache* cache);
  // Runs decoder layer `layer` on `hidden` [B, T, hidden]; with
  // gradient_checkpointing: true in training, its activations are recomputed in
  // backward instead of kept.
  Tensor runLayer(nn::Module& layer, const Tensor& hidden, const Tensor& positions, nn::KVCache* cache);
  // The final hidden states as the output projection reads them: under
  // tensor parallelism in the parallel region (its rows are split by
  // vocabulary, as the embedding's), else x itself.
  Tensor toVocabParallel(const Tensor& x) const;
  // The embeddings [B, T, hidden] (whole on every rank) as the decoder
  // layers read them: under sequence parallelism this rank's positions.
  Tensor toSequenceParallel(const Tensor& embeddings) const;
  TransformerConfig config_;
  Generator* dropout_rng_ = nullptr;
  ops::ParallelGroup* tensor_parallel_ = nullptr;  // the group the layers are split across, if any
  bool sequence_parallel_ = false;                 // activations split along the sequence between its regions
  nn::VocabularyRows vocabulary_;                  // how the embedding and the output head hold the vocabulary
  StagePart stage_;                                // what this rank holds
  DType param_dtype_ = DType::kFloat32;            // of the weights and of the hidden states between stages

 private:
  void evaluate(const Batch& batch, const char* stage);
  // The logits of `ids` at `positions` through every part (see forward).
  Tensor logits(const Tensor& ids, const Tensor& positions, nn::KVCache* cache);
  // Runs the decoder layers of this rank's chunk `chunk` on `hidden`, each
  // drawing its dropout masks from its stream of the current forward's
  // (beginForward).
  Tensor runLayers(Tensor hidden, const Tensor& positions, nn::KVCache* cache, int chunk = 0);
  // Starts a forward pass in training: draws the seed of its dropout streams
  // from the Trainer's generator and points that generator at the
  // embeddings' stream (runLayers, in turn, at each layer's).
  void beginForward();
  // The decoder layers of each of the pipeline_stages x `chunks` model
  // chunks, in the model's order (pipeline_layers, layers_per_virtual_stage,
  // or balanced by parameter count).
  std::vector<std::int64_t> chunkLayers(const nn::InitContext& ctx, int chunks) const;
  // The model chunks each stage holds (InitContext::virtual_stages).
  int virtualStages(const nn::InitContext& ctx) const;
  // Mean next-token cross-entropy of forward's logits (this rank's
  // vocabulary under tensor parallelism).
  Tensor loss(const Tensor& logits, const Tensor& labels) const;
  // The logits of forward over the whole vocabulary (padding included), to
  // pick tokens from.
  Tensor wholeVocabulary(const Tensor& logits) const;
  // The next token of sequence `row` of wholeVocabulary's logits `all`
  // ([rows, len, padded vocab] on the host): picked from its last
  // position's logits of the vocabulary's tokens, never a padding row's.
  std::int64_t pickNext(const std::vector<float>& all, std::int64_t row, std::int64_t len, std::int64_t width,
                        const GenerationOptions& o, Generator& rng) const;
  // predict on a batch of token ids [B, T] (prompts of T tokens each): the
  // continuations of every row, decoded together with one KV cache of B
  // rows; a shape-only batch runs the steps without values (estimate).
  Prediction continueBatch(const Tensor& ids);
  DType cacheDtype() const;
  // Key/value heads the decoding cache holds on this rank.
  std::int64_t localKVHeads() const;
  std::vector<std::string> prompts() const;

  double lr_, weight_decay_;
  std::optional<std::int64_t> vocab_divisible_by_;  // init_args make_vocab_size_divisible_by
  bool gradient_checkpointing_;
  bool checkpoint_on_host_ = false;
  std::optional<DType> kv_cache_dtype_;  // set by fp8 quantization
  GenerationOptions generation_;
  std::string prompt_;
  std::vector<std::string> prompt_list_;
  std::string prompt_file_;
  std::vector<std::pair<std::string, std::string>> messages_;  // (role, content)
  // messages_ rendered with the tokenizer's chat template, ready for the assistant.
  std::string renderConversation() const;
  std::shared_ptr<const data::Tokenizer> tokenizer_;
  std::unique_ptr<Generator> sampling_rng_;
  bool dropout_ = false;            // some dropout probability is above 0
  std::uint64_t dropout_seed_ = 0;  // of the current forward's dropout streams
  std::string pretrained_;               // a Hugging Face model directory, or ""
  std::optional<nn::LoraSettings> lora_;  // from init_args lora, or lora_path's adapter_config.json
  std::string lora_path_;
  std::unique_ptr<PretrainedWeights> pretrained_weights_;  // kept while trainable values are deferred
  // The init_args this model was built from, and their schema: what builds it again, whole (wholeModelKeys).
  config::Node init_args_;
  const config::StructSchema* init_args_schema_;
  // The token that ends a generation: config.json's eos_token_id, else the tokenizer's.
  std::optional<std::int64_t> eosId() const;
  void applyPretrained(nn::InitContext& ctx);
  // The checkpoint keys of every tensor of the whole model: its class built
  // again from its init_args, on one shape-only device (names and shapes, no
  // values), which checks the pretrained files against the whole model as
  // one device does (UsageError naming what does not fit).
  std::set<std::string> wholeModelKeys(const nn::InitContext& ctx) const;
};

// The decoder layers of each of `runs` contiguous runs of `c`'s layers
// (pipeline stages, or model chunks of stages x virtual stages), each at
// least one layer: the largest run in parameters (the embeddings on the
// first, the head on the last) as small as it can be, then, keeping that,
// the most layers of a run as few as can be; ties keep the earlier runs
// smaller. REQUIRES: 1 <= runs <= c.num_hidden_layers.
std::vector<std::int64_t> balancedLayers(const TransformerConfig& c, int runs);

// The init_args every causal LM takes beside its architecture's: config,
// training and generation settings.
std::vector<config::ParamSpec> causalLMParams();

// The model of `family` built from init_args `p` (whose schema declares at
// least causalLMParams(); architecture keys it lacks take config.json's or
// the family's defaults): what AutoModelForCausalLM builds.
std::unique_ptr<CausalLM> makeCausalLM(Family family, const config::Params& p);
std::unique_ptr<CausalLM> makeGpt2LMHeadModel(const config::Params& p);

// The schema of init_args lora (PEFT's LoraConfig keys) and the settings it gives.
const config::StructSchema& loraSchema();
nn::LoraSettings loraSettings(const config::Params& lora, Family family);

}  // namespace hpu::core::models
