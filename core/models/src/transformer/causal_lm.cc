#include "hpu/core/models/causal_lm.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "hpu/core/base/errors.h"
#include "hpu/core/base/file_io.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/data/chat_template.h"
#include "hpu/core/models/hf_directory.h"
#include "hpu/core/nn/layers/rotary.h"
#include "hpu/core/nn/layers/self_attention.h"
#include "hpu/core/ops/autocast.h"
#include "hpu/core/tensor/autograd.h"
#include "hpu/device/check.h"
#include "hpu/device/device.h"
#include "hpu/device/numerics.h"

namespace hpu::core::models {
namespace {

using config::Type;

// The prompts of a predict run as its data: sample i is prompt i's index.
class PromptIndices final : public data::Dataset {
 public:
  explicit PromptIndices(std::int64_t n) : n_(n) {}
  std::int64_t size() const override { return n_; }
  const std::vector<data::Field>& fields() const override { return fields_; }
  void fetch(std::span<const std::int64_t> indices, std::span<const data::FieldBuffer> out) const override {
    std::copy(indices.begin(), indices.end(), out[0].ints);
  }

 private:
  std::int64_t n_;
  std::vector<data::Field> fields_{{"prompt_index", DType::kInt64, {}}};
};

// Megatron-LM's default make_vocab_size_divisible_by.
constexpr std::int64_t kMegatronVocabDivisibleBy = 128;

// The KV cache as the options take it: whole up front, or the prompt's rows first.
nn::KVCacheAllocation cacheAllocation(const GenerationOptions& o) {
  return o.reuse_cache ? nn::KVCacheAllocation::kWhole : nn::KVCacheAllocation::kPromptFirst;
}

// The next token from the last position's logits: the arg-max (the first, as
// torch's), or a draw from softmax(logits / temperature) over the top_k.
std::int64_t pick(std::vector<float> logits, const GenerationOptions& o, Generator& rng) {
  if (!o.do_sample) return std::max_element(logits.begin(), logits.end()) - logits.begin();
  const auto n = static_cast<std::int64_t>(logits.size());
  if (o.top_k > 0 && o.top_k < n) {
    std::vector<float> sorted = logits;
    std::nth_element(sorted.begin(), sorted.begin() + (o.top_k - 1), sorted.end(), std::greater<>());
    const float kth = sorted[static_cast<std::size_t>(o.top_k - 1)];
    for (float& l : logits)
      if (l < kth) l = -std::numeric_limits<float>::infinity();
  }
  const float mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double total = 0;
  for (std::size_t i = 0; i < p.size(); ++i) total += (p[i] = std::exp((logits[i] - mx) / o.temperature));
  double u = rng.uniform() * total;
  for (std::size_t i = 0; i < p.size(); ++i) {
    u -= p[i];
    if (u < 0) return static_cast<std::int64_t>(i);
  }
  return static_cast<std::int64_t>(p.size() - 1);
}

// `e` holding parameter `p`'s whole values and shape, from `values`, its
// values on this device: a padded vocabulary's rows dropped (Hugging Face's
// shapes). REQUIRES: one device holds the whole parameter (export).
checkpoint::TensorEntry wholeEntry(checkpoint::TensorEntry e, const nn::NamedTensor& p, const std::vector<float>& values) {
  HPU_CHECK(p.shard.parts == 1, "{} is split across {} tensor-parallel ranks; export runs on one device", e.name,
            p.shard.parts);
  const Shape whole = p.shard.fullShape(p.tensor.shape());
  e.shape.assign(whole.dims().begin(), whole.dims().end());
  e.values = p.shard.whole(p.tensor.shape(), values);
  return e;
}

}  // namespace

CausalLM::CausalLM(Family family, const config::Params& p)
    : config_(resolveTransformerConfig(family, p)),
      lr_(p.getFloat("lr")),
      weight_decay_(p.getFloat("weight_decay")),
      gradient_checkpointing_(p.node("gradient_checkpointing").str() != "selective" &&
                              config::asBool(p.node("gradient_checkpointing"))),
      generation_{p.getInt("max_new_tokens"), p.getBool("do_sample"), static_cast<float>(p.getFloat("temperature")),
                  p.getInt("top_k"), p.getInt("bucket_size"), p.getBool("reuse_cache")},
      init_args_(p.values()),
      init_args_schema_(&p.schema()) {
  if (p.has("make_vocab_size_divisible_by")) vocab_divisible_by_ = p.getInt("make_vocab_size_divisible_by");
  if (p.has("pretrained")) pretrained_ = p.getString("pretrained");
  if (p.has("lora_path")) lora_path_ = p.getString("lora_path");
  if (p.has("lora"))
    lora_ = loraSettings(config::Params(loraSchema(), p.node("lora"), p.pathOf("lora")), family);
  else if (!lora_path_.empty())
    lora_ = readPeftAdapterConfig(lora_path_);
  if (p.has("prompt")) prompt_ = p.getString("prompt");
  if (p.has("messages"))
    for (const config::Node& m : p.node("messages").items()) {
      const config::Node* role = m.find("role");
      const config::Node* content = m.find("content");
      if (role == nullptr || content == nullptr || !role->isScalar() || !content->isScalar())
        p.fail("messages", "each message is {role: ..., content: ...}");
      messages_.emplace_back(role->str(), content->str());
    }
  if (p.has("prompts")) {
    const config::Node& n = p.node("prompts");
    if (n.isSequence())
      prompt_list_ = p.getStringList("prompts");
    else
      prompt_file_ = n.str();
  }
}

void CausalLM::configureModel(nn::InitContext& ctx, const ModelInput& input) {
  tokenizer_ = input.tokenizer;
  namespace fs = std::filesystem;
  if (!tokenizer_ && !pretrained_.empty() &&
      (fs::exists(fs::path(pretrained_) / "tokenizer.json") || fs::exists(fs::path(pretrained_) / "vocab.json")))
    tokenizer_ = data::loadTokenizer(pretrained_);
  if (config_.vocab_size == 0)  // set neither in init_args nor in config.json: the data's
    config_.vocab_size = tokenizer_ ? tokenizer_->vocabSize() : config_.info().vocab_size;
  if (tokenizer_ && config_.vocab_size < tokenizer_->vocabSize())
    throw UsageError(fmt::format(
        "{}: vocab_size {} is smaller than the {} tokenizer's {} tokens; set "
        "model.init_args.vocab_size to at least {} (or leave it unset)",
        typeName(), config_.vocab_size, tokenizer_->name(), tokenizer_->vocabSize(), tokenizer_->vocabSize()));
  if (config_.pad_token_id && *config_.pad_token_id >= config_.vocab_size) config_.pad_token_id.reset();
  dropout_rng_ = &ctx.dropout_rng;
  tensor_parallel_ = ctx.tensor_parallel;
  sequence_parallel_ = ctx.sequence_parallel && tensor_parallel_ != nullptr;
  // Megatron-LM's padding: to a multiple of make_vocab_size_divisible_by
  // (unless given: the strategy's, or 128) x the tensor-parallel size; none
  // on one rank unless given.
  const int ranks = tensor_parallel_ != nullptr ? tensor_parallel_->size() : 1;
  const std::int64_t divisible_by =
      vocab_divisible_by_.value_or(ranks > 1 ? ctx.vocab_divisible_by.value_or(kMegatronVocabDivisibleBy) : 1);
  vocabulary_ = {tensor_parallel_, divisible_by * ranks};
  if (config_.num_local_experts > 0 && sequence_parallel_)
    throw UsageError(typeName() + ": sparse MoE layers do not run under sequence parallelism (their router reads "
                                  "every position); set trainer.strategy.init_args.sequence_parallel: false");
  if (config_.output_router_logits && ctx.pipeline_stages > 1)
    throw UsageError(typeName() + ": output_router_logits (the load-balancing loss over every layer's routing) "
                                  "does not run pipeline-parallel; set pipeline_parallel_size: 1 or "
                                  "output_router_logits: false");
  // Stage s of P holds chunks s, s + P, s + 2P, ... of the P x chunks.
  const int chunks = virtualStages(ctx), stages = ctx.pipeline_stages;
  const std::vector<std::int64_t> layers = chunkLayers(ctx, chunks);
  stage_.chunks.clear();
  std::size_t local = 0;
  for (int c = 0; c < chunks; ++c) {
    const auto k = static_cast<std::ptrdiff_t>(c * stages + ctx.pipeline_stage);
    const std::int64_t begin = std::accumulate(layers.begin(), layers.begin() + k, std::int64_t{0});
    const std::int64_t count = layers[static_cast<std::size_t>(k)];
    stage_.chunks.push_back({begin, begin + count, local});
    local += static_cast<std::size_t>(count);
  }
  stage_.first = ctx.pipeline_stage == 0;
  stage_.last = ctx.pipeline_stage + 1 == stages;
  param_dtype_ = ctx.param_dtype;
  // Each layer draws its masks from its own stream: a pipeline stage, which
  // runs some of the layers, draws one device's.
  dropout_ = config_.attention_dropout > 0 || config_.resid_dropout > 0 || config_.embd_dropout > 0 ||
             (lora_ && lora_->lora_dropout > 0);
  checkpoint_on_host_ = ctx.checkpoint_on_host;
  sampling_rng_ = std::make_unique<Generator>(ctx.seed, RandomStream::kSampling);
  build(ctx);
  applyPretrained(ctx);
}

// LoRA wraps the layers first (a wrapped layer keeps its parameters'
// names), so that the pretrained files fill the base weights and what stays
// trainable is known: under ZeRO-3 those are filled later, each rank its
// shard (fillDeferredParameter), and frozen ones whole here.
void CausalLM::applyPretrained(nn::InitContext& ctx) {
  const auto key = [this](const std::string& name) { return checkpointKey(name); };
  if (lora_) {
    // A pipeline stage may hold none of the targets; the whole model must.
    const bool whole = stage_.first && stage_.last;
    const std::vector<std::string> adapted = nn::applyLora(*this, ctx, *lora_, /*require_match=*/whole);
    if (adapted.empty()) {
      wholeModelKeys(ctx);  // throws as applyLora does when no layer of the model matches
      spdlog::debug("LoRA: no layer of pipeline stage {} adapted", ctx.pipeline_stage);
    } else {
      spdlog::debug("LoRA: {} layers adapted ({} ...)", adapted.size(), adapted.front());
    }
  }
  if (!pretrained_.empty()) {
    // A pipeline stage, or an expert-parallel rank, holds part of the model
    // the files hold: the whole model is checked against them, and the rank
    // copies its own tensors.
    const bool part = !(stage_.first && stage_.last) || (ctx.expert_parallel && ctx.expert_parallel->size() > 1);
    const std::set<std::string> other_stages = part ? wholeModelKeys(ctx) : std::set<std::string>{};
    pretrained_weights_ = std::make_unique<PretrainedWeights>(pretrained_, /*header_only=*/ctx.device.shapeOnly());
    const bool defer = ctx.defer_trainable_values;
    loadPretrainedWeights(
        *this, key,
        [defer](const nn::NamedTensor& t) {
          if (nn::isLoraAdapter(t.name)) return PretrainedLoad::kAbsent;
          return defer && t.tensor.requiresGrad() ? PretrainedLoad::kCheckOnly : PretrainedLoad::kCopy;
        },
        *pretrained_weights_, other_stages);
    if (!defer) pretrained_weights_.reset();
  }
  if (!lora_ || lora_path_.empty()) return;
  // PEFT's adapter file: the trainable tensors under kPeftPrefix + their names.
  const std::string file = (std::filesystem::path(lora_path_) / "adapter_model.safetensors").string();
  const auto adapter = checkpoint::SafetensorsFile::open(file, ctx.device.shapeOnly());
  std::vector<std::string> problems;
  std::set<std::string> loaded;
  for (const auto& p : namedParameters()) {
    if (!p.tensor.requiresGrad()) continue;
    const std::string name = kPeftPrefix + nn::peftParameterName(*this, key(p.name));
    const checkpoint::SafetensorsTensor* t = adapter->find(name);
    if (t == nullptr) {
      problems.push_back(name + " is missing");
      continue;
    }
    loaded.insert(name);
    const Shape whole = p.shard.fullShape(p.tensor.shape());
    const std::vector<std::int64_t> want(whole.dims().begin(), whole.dims().end());
    if (t->shape != want || t->dtype == DType::kInt64) {
      problems.push_back(fmt::format("{} is {} [{}], the model's {} [{}]", name, device::dtypeName(t->dtype),
                                     fmt::join(t->shape, ", "), device::dtypeName(p.tensor.dtype()),
                                     fmt::join(want, ", ")));
      continue;
    }
    if (p.tensor.shapeOnly()) continue;
    Tensor dst = p.tensor;
    const std::span<float> values = dst.values();
    p.shard.forEachRun(dst.shape(), [&](std::int64_t full, std::int64_t local, std::int64_t count) {
      adapter->copy(*t, full, values.subspan(static_cast<std::size_t>(local), static_cast<std::size_t>(count)));
    });
    if (dst.dtype() == DType::kBFloat16 || dst.dtype() == DType::kFloat16) device::roundInPlace(dst.values(), dst.dtype());
  }
  for (const auto& t : adapter->tensors())
    if (!loaded.count(t.name)) problems.push_back(t.name + " is not a trainable tensor of this model's LoRA");
  if (!problems.empty())
    throw UsageError(fmt::format("model.init_args.lora_path: {} does not fit the model with its LoRA settings: {}",
                                 file, fmt::join(problems, "; ")));
}

std::set<std::string> CausalLM::wholeModelKeys(const nn::InitContext& ctx) const {
  const config::ComponentSchema* schema = nullptr;
  for (const config::ComponentSchema* s : config::SchemaRegistry::instance().list(config::ComponentKind::kModel))
    if (&s->init_args == init_args_schema_) schema = s;
  HPU_CHECK(schema != nullptr, "{} was not built from a registered component's init_args", typeName());
  device::DeviceOptions shapes;
  shapes.memoryLimit = {std::numeric_limits<std::uint64_t>::max(), "host memory"};
  shapes.shapeOnly = true;
  device::Device device(-1, -1, ctx.device.spec().generation, shapes);  // outlives the model built on it
  Generator init(ctx.seed), dropout(ctx.seed);
  config::Node component = config::Node::map();
  component.set("class_path", config::Node::scalar(schema->classPath()));
  component.set("init_args", init_args_);
  const std::unique_ptr<LightningModule> whole =
      config::ComponentFactory<LightningModule>::instance().create(component, "model");
  nn::InitContext one_device{device, init, dropout, ctx.param_dtype};
  one_device.seed = ctx.seed;
  ModelInput input;
  input.tokenizer = tokenizer_;
  whole->configureModel(one_device, input);
  std::set<std::string> keys;
  for (const auto& p : whole->namedParameters()) keys.insert(checkpointKey(p.name));
  for (const auto& b : whole->namedBuffers()) keys.insert(checkpointKey(b.name));
  return keys;
}

bool CausalLM::fillDeferredParameter(const nn::NamedTensor& param, std::int64_t first, std::span<float> out) {
  if (!pretrained_weights_ || nn::isLoraAdapter(param.name)) return false;
  const std::string key = checkpointKey(param.name);
  if (!param.shard.split()) {
    pretrained_weights_->copy(key, first, out);
    return true;
  }
  // Elements [first, first + out.size()) of this rank's piece of the files'
  // tensor (split or padded): the files' elements its runs map them to,
  // zero in padding rows.
  std::fill(out.begin(), out.end(), 0.0f);
  const std::int64_t end = first + static_cast<std::int64_t>(out.size());
  param.shard.forEachRun(param.tensor.shape(), [&](std::int64_t full, std::int64_t local, std::int64_t count) {
    const std::int64_t from = std::max(first, local), to = std::min(end, local + count);
    if (from < to)
      pretrained_weights_->copy(key, full + (from - local),
                                out.subspan(static_cast<std::size_t>(from - first), static_cast<std::size_t>(to - from)));
  });
  return true;
}

void CausalLM::deferredParametersFilled() {
  if (!pretrained_weights_) return;
  const std::uint64_t read = pretrained_weights_->bytesRead(), stored = pretrained_weights_->bytesStored();
  spdlog::info("pretrained: this rank read {} of the {} bytes ({:.0f}%) of weights in {}", read, stored,
               100.0 * static_cast<double>(read) / static_cast<double>(std::max<std::uint64_t>(stored, 1)),
               pretrained_);
  pretrained_weights_.reset();
}

std::optional<std::int64_t> CausalLM::eosId() const {
  if (config_.eos_token_id) return config_.eos_token_id;
  return tokenizer_ ? tokenizer_->settings().eos_id : std::nullopt;
}

void CausalLM::exportPretrained(const std::string& dir) const {
  // PEFT's merge_and_unload on copies: adapted weights with their adapters added, the adapters left out.
  const std::map<std::string, const nn::LoraLinear*> adapted = nn::loraLayers(*this);
  if (!adapted.empty())
    spdlog::info("export: merged the LoRA adapters of {} layers into their weights", adapted.size());
  std::vector<checkpoint::TensorEntry> tensors;
  DType dtype = DType::kFloat32;
  for (const auto& p : namedParameters()) {
    if (nn::isLoraAdapter(p.name)) continue;
    checkpoint::TensorEntry e;
    e.name = checkpointKey(p.name);
    dtype = p.tensor.dtype();
    if (device::isFp8(dtype))
      throw UsageError("export: " + e.name + " is an fp8 weight; export the bf16 checkpoint the fp8 run started from");
    e.dtype = dtype;
    const auto layer = adapted.find(p.name);
    e = wholeEntry(std::move(e), p, layer == adapted.end() ? p.tensor.toHost() : layer->second->mergedWeight());
    tensors.push_back(std::move(e));
  }
  TransformerConfig c = config_;
  const data::TokenizerSettings none;
  const data::TokenizerSettings& t = tokenizer_ ? tokenizer_->settings() : none;
  if (!c.bos_token_id) c.bos_token_id = t.bos_id;
  if (!c.eos_token_id) c.eos_token_id = t.eos_id;
  if (!c.pad_token_id) c.pad_token_id = t.pad_id;
  namespace fs = std::filesystem;
  writeFileAtomically((fs::path(dir) / "config.json").string(), hfConfigJson(c, dtype));
  writeFileAtomically((fs::path(dir) / "generation_config.json").string(),
                      hfGenerationConfigJson(c.bos_token_id, c.eos_token_id, c.pad_token_id));
  if (tokenizer_)
    tokenizer_->save(dir);
  else
    spdlog::warn("export: the model has no tokenizer (neither its data's nor its pretrained directory's); {} holds "
                 "no tokenizer files",
                 dir);
  writePretrainedWeights(dir, std::move(tensors));
}

void CausalLM::saveAdapter(const std::string& dir) const {
  if (!lora_)
    throw UsageError("export --adapter: the checkpoint's model has no LoRA adapters (model.init_args.lora is null)");
  checkpoint::Checkpoint adapter;
  adapter.metadata["format"] = "pt";
  for (const auto& p : namedParameters()) {
    if (!p.tensor.requiresGrad()) continue;  // applyLora left exactly the adapter's tensors trainable
    checkpoint::TensorEntry e;
    e.name = kPeftPrefix + nn::peftParameterName(*this, checkpointKey(p.name));
    e.dtype = p.tensor.dtype();
    adapter.tensors.push_back(wholeEntry(std::move(e), p, p.tensor.toHost()));
  }
  namespace fs = std::filesystem;
  writeFileAtomically((fs::path(dir) / "adapter_config.json").string(),
                      peftAdapterConfigJson(*lora_, pretrained_, config_.model_type));
  checkpoint::writeSafetensorsFile(adapter, (fs::path(dir) / "adapter_model.safetensors").string());
}

std::vector<nn::Module*> CausalLM::backbone() {
  std::vector<nn::Module*> out;
  for (const auto& [name, child] : children())
    if (name != "lm_head") out.push_back(child.get());
  return out;
}

Tensor CausalLM::forward(const nn::Inputs& inputs) {
  const Tensor& ids = inputs.tensors["input_ids"];
  if (ids.ndim() != 2 || ids.dtype() != DType::kInt64)
    throw Error(fmt::format("{}: input_ids must be int64 [batch, tokens], got {} {}", typeName(),
                            device::dtypeName(ids.dtype()), ids.shape().str()));
  const std::int64_t len = ids.size(1), start = inputs.kv_cache ? inputs.kv_cache->length() : 0;
  if (start + len > config_.max_position_embeddings)
    throw Error(fmt::format("{}: {} positions exceed max_position_embeddings {}", typeName(), start + len,
                            config_.max_position_embeddings));
  const Tensor* given = inputs.tensors.find("position_ids");
  // Sequence parallelism in training and evaluation; generation (a KV cache) runs without.
  const ops::SequenceParallelScope sequence_parallel(sequence_parallel_ && inputs.kv_cache == nullptr);
  if (!stage_.first || !stage_.last)
    throw Error(fmt::format("{}: forward on a pipeline stage of its layers {}-{}: a stage runs only through the "
                            "pipeline schedule",
                            typeName(), stage_.chunks.front().begin, stage_.chunks.back().end - 1));
  Tensor out = logits(ids, given ? *given : nn::positionRange(ids.device(), start, len), inputs.kv_cache);
  if (inputs.kv_cache) inputs.kv_cache->advance(len);
  return out;
}

Tensor CausalLM::logits(const Tensor& ids, const Tensor& positions, nn::KVCache* cache) {
  beginForward();
  return head(runLayers(embed(ids, positions), positions, cache), cache);
}

void CausalLM::beginForward() {
  if (!training() || !dropout_) return;
  dropout_seed_ = dropout_rng_->next();
  *dropout_rng_ = Generator(dropout_seed_, 0);
}

std::vector<std::int64_t> CausalLM::StagePart::layers() const {
  std::vector<std::int64_t> all;
  for (const LayerRun& run : chunks)
    for (std::int64_t l = run.begin; l < run.end; ++l) all.push_back(l);
  return all;
}

Tensor CausalLM::runLayers(Tensor hidden, const Tensor& positions, nn::KVCache* cache, int chunk) {
  nn::ModuleList& layers = decoderLayers();  // StagePart::layers()' order
  const LayerRun& run = stage_.chunks.at(static_cast<std::size_t>(chunk));
  std::size_t local = run.local;
  for (std::int64_t l = run.begin; l < run.end; ++l, ++local) {
    if (training() && dropout_) *dropout_rng_ = Generator(dropout_seed_, static_cast<std::uint64_t>(l) + 1);
    hidden = runLayer(layers[local], hidden, positions, cache);
  }
  return hidden;
}

CausalLM::PartInit::PartInit(const nn::InitContext& base, InitPart part, std::int64_t layer)
    // Sub-streams of kInit past the Trainer's own (0).
    : rng(base.seed, RandomStream::kInit, ((static_cast<std::uint64_t>(part) + 1) << 40) + static_cast<std::uint64_t>(layer)),
      ctx(nn::withRng(base, rng)) {}

// Parameters per decoder layer, in the embeddings and in the output head,
// from the config (Hugging Face's layouts; tied, the last stage holds a copy
// of the embedding matrix all the same).
namespace {
struct PartSizes {
  std::int64_t layer = 0, embeddings = 0, head = 0;
};
PartSizes partSizes(const TransformerConfig& c) {
  const std::int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim,
                     kv = c.num_key_value_heads * c.head_dim, i = c.intermediate_size;
  PartSizes s;
  s.embeddings = c.vocab_size * h;
  s.head = c.vocab_size * h;
  if (c.family == Family::kGpt2) {
    s.layer = (h * 3 * h + 3 * h) + (h * h + h) + (h * i + i) + (i * h + h) + 4 * h;
    s.embeddings += c.max_position_embeddings * h;
    s.head += 2 * h;  // ln_f
    return s;
  }
  const std::int64_t mlp = 3 * h * i + (c.mlp_bias ? 2 * i + h : 0);
  s.layer = h * (q + 2 * kv) + q * h + (c.family == Family::kGemma2 ? 4 : 2) * h;
  s.layer += c.num_local_experts > 0 ? c.num_local_experts * mlp + h * c.num_local_experts : mlp;
  if (c.qkv_bias) s.layer += q + 2 * kv;
  if (c.output_bias) s.layer += h;
  s.head += h;  // norm
  return s;
}
}  // namespace

int CausalLM::virtualStages(const nn::InitContext& ctx) const {
  const nn::VirtualStages& v = ctx.virtual_stages;
  const std::int64_t layers = config_.num_hidden_layers, stages = ctx.pipeline_stages;
  const std::string at = v.origin.empty() ? "" : v.origin + ": ";
  if (v.layers == 0) {
    if (v.count > 1 && stages * v.count > layers)
      throw UsageError(fmt::format("{}trainer.strategy.init_args.virtual_pipeline_size: {} pipeline stages x {} "
                                   "virtual stages make {} model chunks of at least one decoder layer each, but {} "
                                   "has {} (num_hidden_layers); use at most {}",
                                   at, stages, v.count, stages * v.count, typeName(), layers,
                                   std::max<std::int64_t>(1, layers / stages)));
    return v.count;
  }
  if (layers % (stages * v.layers) != 0) {
    std::vector<std::int64_t> fits;
    for (std::int64_t n = 1; layers % stages == 0 && n <= layers / stages; ++n)
      if (layers / stages % n == 0) fits.push_back(n);
    throw UsageError(fmt::format(
        "{}trainer.strategy.init_args.layers_per_virtual_stage: {} pipeline stages of model chunks of {} decoder "
        "layers do not divide {}'s {} (num_hidden_layers); {}",
        at, stages, v.layers, typeName(), layers,
        fits.empty() ? fmt::format("{} is not a multiple of {}: set virtual_pipeline_size instead", layers, stages)
                     : fmt::format("use {}", fmt::join(fits, ", "))));
  }
  return static_cast<int>(layers / (stages * v.layers));
}

std::vector<std::int64_t> CausalLM::chunkLayers(const nn::InitContext& ctx, int chunks) const {
  const std::int64_t layers = config_.num_hidden_layers;
  const int stages = ctx.pipeline_stages * chunks;
  if (!ctx.pipeline_layers.empty()) {
    std::vector<std::int64_t> given(ctx.pipeline_layers.begin(), ctx.pipeline_layers.end());
    if (static_cast<int>(given.size()) != stages ||
        std::accumulate(given.begin(), given.end(), std::int64_t{0}) != layers ||
        *std::min_element(given.begin(), given.end()) < 1)
      throw UsageError(fmt::format("trainer.strategy.init_args.pipeline_layers: [{}] does not give each of the {} "
                                   "{} at least one of {}'s {} decoder layers",
                                   fmt::join(given, ", "), stages, chunks > 1 ? "model chunks" : "pipeline stages",
                                   typeName(), layers));
    return given;
  }
  if (ctx.virtual_stages.layers > 0) return std::vector<std::int64_t>(static_cast<std::size_t>(stages), ctx.virtual_stages.layers);
  if (stages > layers)
    throw UsageError(fmt::format("trainer.strategy.init_args.pipeline_parallel_size: {} stages, but {} has only {} "
                                 "decoder layers (num_hidden_layers); use at most {} stages",
                                 stages, typeName(), layers, layers));
  return balancedLayers(config_, stages);
}

std::vector<std::int64_t> balancedLayers(const TransformerConfig& c, int runs) {
  const std::int64_t layers = c.num_hidden_layers;
  if (runs == 1) return {layers};
  const PartSizes size = partSizes(c);
  const auto cost = [&](int run, std::int64_t n) {
    return n * size.layer + (run == 0 ? size.embeddings : 0) + (run == runs - 1 ? size.head : 0);
  };
  const auto at = [](auto& table, int run, std::int64_t n) -> auto& {
    return table[static_cast<std::size_t>(run)][static_cast<std::size_t>(n)];
  };
  // The split of contiguous runs of at least one layer with the smallest
  // largest value(run, layers) among those that `allow` every run; ties
  // keep the earlier runs smaller. Returns that largest value and the split.
  const auto minMax = [&](const auto& value, const auto& allow) {
    // best[s][n]: the smallest largest value for runs s.. holding the last n layers.
    constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();
    std::vector<std::vector<std::int64_t>> best(static_cast<std::size_t>(runs) + 1,
                                                std::vector<std::int64_t>(static_cast<std::size_t>(layers) + 1, kNone));
    std::vector<std::vector<std::int64_t>> take = best;
    at(best, runs, 0) = 0;
    for (int s = runs - 1; s >= 0; --s)
      for (std::int64_t n = 1; n <= layers; ++n)
        for (std::int64_t k = 1; k <= n; ++k) {
          const std::int64_t rest = at(best, s + 1, n - k);
          if (rest == kNone || !allow(s, k)) continue;
          const std::int64_t worst = std::max(rest, value(s, k));
          if (worst < at(best, s, n)) {
            at(best, s, n) = worst;
            at(take, s, n) = k;
          }
        }
    std::vector<std::int64_t> split;
    for (std::int64_t s = 0, n = layers; s < runs; ++s) {
      split.push_back(at(take, static_cast<int>(s), n));
      n -= split.back();
    }
    return std::pair{at(best, 0, layers), split};
  };
  // The largest run in parameters as small as it can be, then, among the
  // splits that keep it, the most layers of a run (compute) as few as can be.
  const std::int64_t largest = minMax(cost, [](int, std::int64_t) { return true; }).first;
  return minMax([](int, std::int64_t n) { return n; },
                [&](int run, std::int64_t n) { return cost(run, n) <= largest; })
      .second;
}

PipelineModule::StageInput CausalLM::stageInput(const Batch& batch) const {
  const Tensor& ids = batch["input_ids"];
  const std::int64_t tokens = sequence_parallel_ ? ids.size(1) / tensor_parallel_->size() : ids.size(1);
  return {Shape{ids.size(0), tokens, config_.hidden_size}, param_dtype_};
}

Tensor CausalLM::forwardStage(const Batch& batch, const Tensor& input, int chunk) {
  const Tensor& ids = batch["input_ids"];
  const Tensor* given = batch.find("position_ids");
  const Tensor positions = given ? *given : nn::positionRange(ids.device(), 0, ids.size(1));
  const ops::SequenceParallelScope sequence_parallel(sequence_parallel_);
  beginForward();
  const bool embeds = stage_.first && chunk == 0, ends = stage_.last && chunk + 1 == chunks();
  Tensor hidden = runLayers(embeds ? embed(ids, positions) : input, positions, nullptr, chunk);
  return ends ? loss(head(hidden, nullptr), batch["labels"]) : hidden;
}

void CausalLM::logLoss(std::string_view split, double value) {
  log(std::string(split) + "_loss", value, {.prog_bar = true});
  // A byte is a token: bits per byte are nats per token over ln 2.
  if (split != "train" && tokenizer_ && tokenizer_->byteLevel())
    log(std::string(split) + "_bpb", value / std::log(2.0), {.prog_bar = true});
}

std::vector<Tensor> CausalLM::stageSharedParameters() const {
  if (stage_.first == stage_.last) return {};  // one stage, or a middle one
  const Tensor tied = tiedEmbedding();
  if (!tied.defined()) return {};
  return {tied};
}

Tensor CausalLM::statesToPredict(const Tensor& hidden, const nn::KVCache* cache) {
  return cache == nullptr ? hidden : ops::narrow(hidden, 1, hidden.size(1) - 1, 1);
}

Tensor CausalLM::runLayer(nn::Module& layer, const Tensor& hidden, const Tensor& positions, nn::KVCache* cache) {
  // A recomputation in backward (activation checkpointing) splits as the forward did.
  const auto call = [&layer, positions, cache, sequence_parallel = ops::sequenceParallel()](const Tensor& h) {
    const ops::SequenceParallelScope scope(sequence_parallel);
    return layer(nn::Inputs{{{"hidden_states", h}, {"position_ids", positions}}, cache});
  };
  if (gradient_checkpointing_ && training() && cache == nullptr && autograd::currentTape() != nullptr)
    return ops::checkpoint(call, hidden, dropout_rng_, checkpoint_on_host_);
  return call(hidden);
}

Tensor CausalLM::toSequenceParallel(const Tensor& embeddings) const {
  return tensor_parallel_ ? ops::scatterToSequence(embeddings, *tensor_parallel_) : embeddings;
}

Tensor CausalLM::toVocabParallel(const Tensor& x) const {
  return tensor_parallel_ ? ops::toParallelRegion(x, *tensor_parallel_) : x;
}

Tensor CausalLM::loss(const Tensor& logits, const Tensor& labels) const {
  const std::int64_t vocab = config_.vocab_size;
  if (!tensor_parallel_) return addAuxiliaryLosses(ops::crossEntropy(logits, labels, {.classes = vocab}));
  return addAuxiliaryLosses(
      ops::vocabParallelCrossEntropy(logits, labels, vocabulary_.start(vocab), vocab, *tensor_parallel_));
}

Tensor CausalLM::wholeVocabulary(const Tensor& logits) const {
  return tensor_parallel_ ? ops::gatherFromParallel(logits, *tensor_parallel_) : logits;
}

std::int64_t CausalLM::pickNext(const std::vector<float>& all, std::int64_t row, std::int64_t len,
                                std::int64_t width, const GenerationOptions& o, Generator& rng) const {
  const auto last = all.begin() + ((row + 1) * len - 1) * width;
  return pick(std::vector<float>(last, last + config_.vocab_size), o, rng);
}

Tensor CausalLM::trainingStep(const Batch& batch, std::int64_t) {
  Tensor l = loss((*this)(nn::Inputs{batch}), batch["labels"]);
  log("train_loss", l, {.prog_bar = true});
  return l;
}

void CausalLM::evaluate(const Batch& batch, const char* stage) {
  Tensor l = loss((*this)(nn::Inputs{batch}), batch["labels"]);
  if (l.shapeOnly())
    log(std::string(stage) + "_loss", l, {.prog_bar = true});
  else
    logLoss(stage, l.item());
}

void CausalLM::validationStep(const Batch& batch, std::int64_t) { evaluate(batch, "val"); }
void CausalLM::testStep(const Batch& batch, std::int64_t) { evaluate(batch, "test"); }

std::vector<std::string> CausalLM::prompts() const {
  std::vector<std::string> out;
  if (!prompt_.empty()) out.push_back(prompt_);
  out.insert(out.end(), prompt_list_.begin(), prompt_list_.end());
  if (!prompt_file_.empty()) {
    std::ifstream in(prompt_file_);
    if (!in) throw UsageError("model.init_args.prompts: cannot read the prompt file " + prompt_file_);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) out.push_back(line);
  }
  return out;
}

std::shared_ptr<const data::Dataset> CausalLM::predictData() {
  const auto n = static_cast<std::int64_t>(prompts().size()) + (messages_.empty() ? 0 : 1);
  if (n == 0)
    throw UsageError(typeName() +
                     " generates from prompts: give model.init_args.prompt (--model.prompt='Once upon a "
                     "time'), prompts (a list, or a file with one per line), or messages (a conversation)");
  if (!tokenizer_)
    throw UsageError(typeName() +
                     " needs a tokenizer to read prompts and write text: its data's (TextDataModule) or its "
                     "pretrained directory's (model.init_args.pretrained)");
  return std::make_shared<PromptIndices>(n);
}

std::string CausalLM::renderConversation() const {
  const data::TokenizerSettings& t = tokenizer_->settings();
  if (t.chat_template.empty())
    throw UsageError("model.init_args.messages: the " + tokenizer_->name() +
                     " tokenizer has no chat_template (tokenizer_config.json) to render a conversation with");
  nlohmann::ordered_json conversation = nlohmann::ordered_json::array();
  for (const auto& [role, content] : messages_) conversation.push_back({{"role", role}, {"content", content}});
  return data::ChatTemplate(t.chat_template, "tokenizer_config.json: chat_template")
      .render(conversation, data::chatTemplateInputs(t, /*add_generation_prompt=*/true));
}

Prediction CausalLM::predictStep(const Batch& batch, std::int64_t) {
  if (const Tensor* ids = batch.find("input_ids")) return continueBatch(*ids);
  const std::vector<std::string> all = prompts();
  const Tensor& index = batch["prompt_index"];
  Prediction out;
  for (std::int64_t i = 0; i < index.numel(); ++i) {
    const auto at = static_cast<std::size_t>(index.labels()[i]);
    // The conversation of init_args messages comes after the prompts; its
    // rendered text holds its special tokens (apply_chat_template's).
    const bool chat = at == all.size();
    const std::string prompt = chat ? renderConversation() : all.at(at);
    const std::vector<std::int64_t> ids =
        chat ? tokenizer_->encode(prompt, "model.init_args.messages")
             : tokenizer_->encodeWithSpecialTokens(prompt, "model.init_args.prompt");
    if (ids.empty()) throw UsageError("model.init_args.prompt: an empty prompt gives nothing to continue");
    std::vector<std::int64_t> completion = generate(ids, generation_, *sampling_rng_);
    // The text without the end-of-text token (skip_special_tokens' view); the ids keep it.
    std::vector<std::int64_t> shown = completion;
    if (const auto eos = eosId(); eos && !shown.empty() && shown.back() == *eos) shown.pop_back();
    out.texts.push_back({prompt, tokenizer_->decode(shown), std::move(completion)});
  }
  return out;
}

Prediction CausalLM::continueBatch(const Tensor& ids) {
  const std::int64_t batch = ids.size(0), prompt_len = ids.size(1);
  const GenerationOptions& o = generation_;
  if (prompt_len + o.max_new_tokens > config_.max_position_embeddings)
    throw UsageError(fmt::format("{}: prompts of {} tokens and max_new_tokens {} exceed max_position_embeddings {}",
                                 typeName(), prompt_len, o.max_new_tokens, config_.max_position_embeddings));
  autograd::TapeScope no_grad(nullptr);
  device::Device& dev = ids.device();
  nn::KVCache cache(dev, config_.num_hidden_layers, batch, localKVHeads(), prompt_len + o.max_new_tokens,
                    config_.head_dim, cacheDtype(), o.bucket_size, cacheAllocation(o));
  std::vector<std::vector<std::int64_t>> rows(static_cast<std::size_t>(batch));
  std::vector<bool> ended(static_cast<std::size_t>(batch), false);
  const std::optional<std::int64_t> eos = eosId();
  Tensor feed = ids;
  for (std::int64_t step = 0; step < o.max_new_tokens; ++step) {
    const Tensor out = wholeVocabulary((*this)(nn::Inputs{{{"input_ids", feed}}, &cache}));
    dev.graph().markStep();
    if (out.shapeOnly()) {  // a dry run: the next tokens' shape, no values
      feed = Tensor::fromHost(dev, {batch, 1}, std::span<const std::int64_t>{});
      continue;
    }
    const std::vector<float> all = out.toHost();
    std::vector<std::int64_t> next(static_cast<std::size_t>(batch));
    for (std::int64_t b = 0; b < batch; ++b) {
      next[static_cast<std::size_t>(b)] = pickNext(all, b, out.size(1), out.size(2), o, *sampling_rng_);
      if (!ended[static_cast<std::size_t>(b)])
        rows[static_cast<std::size_t>(b)].push_back(next[static_cast<std::size_t>(b)]);
      if (eos && next[static_cast<std::size_t>(b)] == *eos)
        ended[static_cast<std::size_t>(b)] = true;
    }
    if (std::all_of(ended.begin(), ended.end(), [](bool e) { return e; })) break;
    feed = Tensor::fromHost(dev, {batch, 1}, next);
  }
  Prediction out;
  if (ids.shapeOnly()) return out;
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t* first = ids.labels() + b * prompt_len;
    const std::vector<std::int64_t> prompt(first, first + prompt_len);
    std::vector<std::int64_t>& completion = rows[static_cast<std::size_t>(b)];
    out.texts.push_back({tokenizer_ ? tokenizer_->decode(prompt) : "", tokenizer_ ? tokenizer_->decode(completion) : "",
                         std::move(completion)});
  }
  return out;
}

std::int64_t CausalLM::localKVHeads() const {
  if (!tensor_parallel_) return config_.num_key_value_heads;
  return nn::localHeads(config_.num_attention_heads, config_.num_key_value_heads, tensor_parallel_->size()).kv_heads;
}

DType CausalLM::cacheDtype() const {
  if (kv_cache_dtype_) return *kv_cache_dtype_;
  // Keys and values in the dtype attention computes in.
  const autocast::State& amp = autocast::current();
  return amp.enabled ? amp.dtype : parameters().front().dtype();
}

std::vector<std::int64_t> CausalLM::generate(const std::vector<std::int64_t>& prompt, const GenerationOptions& o,
                                             Generator& rng, bool use_cache) {
  const auto prompt_len = static_cast<std::int64_t>(prompt.size());
  if (prompt_len + o.max_new_tokens > config_.max_position_embeddings)
    throw UsageError(fmt::format("{}: a prompt of {} tokens and max_new_tokens {} exceed max_position_embeddings {}",
                                 typeName(), prompt_len, o.max_new_tokens, config_.max_position_embeddings));
  autograd::TapeScope no_grad(nullptr);
  device::Device& dev = device();
  std::unique_ptr<nn::KVCache> cache;
  if (use_cache)
    cache = std::make_unique<nn::KVCache>(dev, config_.num_hidden_layers, 1, localKVHeads(),
                                          prompt_len + o.max_new_tokens, config_.head_dim, cacheDtype(),
                                          o.bucket_size, cacheAllocation(o));
  std::vector<std::int64_t> sequence = prompt, generated;
  for (std::int64_t step = 0; step < o.max_new_tokens; ++step) {
    // With the cache: the prompt once, then one token per step.
    const std::vector<std::int64_t> feed =
        use_cache && step > 0 ? std::vector<std::int64_t>{sequence.back()} : sequence;
    const auto len = static_cast<std::int64_t>(feed.size());
    const Tensor ids = Tensor::fromHost(dev, {1, len}, feed);
    const Tensor out = wholeVocabulary((*this)(nn::Inputs{{{"input_ids", ids}}, cache.get()}));
    dev.graph().markStep();
    const std::int64_t next = pickNext(out.toHost(), 0, out.size(1), out.size(2), o, rng);
    sequence.push_back(next);
    generated.push_back(next);
    if (const auto eos = eosId(); eos && next == *eos) break;
  }
  return generated;
}

OptimizerConfig CausalLM::configureOptimizers() {
  optim::AdamOptions o;
  o.lr = lr_;
  o.beta1 = 0.9;
  o.beta2 = 0.95;
  o.weight_decay = weight_decay_;
  return {optim::makeAdamW(o), nullptr};
}

std::vector<config::ParamSpec> causalLMParams() {
  return {
      {"config", Type::optional(Type::path(config::PathKind::kFileOrDirectory)), "null",
       "A Hugging Face config.json to read the architecture from; init_args given beside it win."},
      {"pretrained", Type::optional(Type::path(config::PathKind::kDirectory)), "null",
       "A Hugging Face model directory: its config.json (unless config is given), its weights (model.safetensors "
       "or a sharded index; F32, BF16, F16) and, when the data brings none, its tokenizer."},
      {"lora", Type::optional(Type::structure(&loraSchema())), "null",
       "LoRA fine-tuning with PEFT's LoraConfig keys: only the adapters (and modules_to_save) train."},
      {"lora_path", Type::optional(Type::path(config::PathKind::kDirectory)), "null",
       "A PEFT adapter directory (adapter_config.json, adapter_model.safetensors) to start from; its LoraConfig "
       "applies when lora is not given."},
      {"gradient_checkpointing", Type::anyOf({Type::boolean(), Type::string({"selective"})}), "false",
       "true: recompute each decoder layer's activations in backward instead of keeping them; selective: "
       "recompute only the attention core (Megatron-LM's --recompute-granularity selective)."},
      {"attn_implementation", Type::string({"sdpa", "eager"}), "sdpa",
       "Attention as one fused FlashAttention kernel (sdpa), or with its [batch, heads, queries, keys] scores "
       "materialised, a product, a masked softmax and a product (eager: transformers' eager attention, "
       "optimum-habana without --use_flash_attention). The same function; time and memory differ."},
      {"make_vocab_size_divisible_by", Type::optional(Type::integer().min(1)), "null",
       "Pad the embedding and the output head to a multiple of this x the tensor-parallel size (Megatron-LM's "
       "--make-vocab-size-divisible-by), so that any vocabulary splits across the ranks; the padding rows are zero "
       "and their logits are left out of the loss and of generation. null: 128 under tensor parallelism (1 under "
       "DeepSpeed-inference's tensor_parallel, as its AutoTP), no padding on one rank. Checkpoints and exports hold "
       "the unpadded vocabulary."},
      {"lr", Type::real().min(0.0, true), "0.0003", "Learning rate of the default AdamW (betas 0.9, 0.95)."},
      {"weight_decay", Type::real().min(0.0), "0.1", "Weight decay of the default AdamW."},
      {"prompt", Type::optional(Type::string()), "null", "predict: a text to continue."},
      {"prompts", Type::optional(Type::anyOf({Type::list(Type::string()), Type::path(config::PathKind::kFile)})), "null",
       "predict: texts to continue, a list or a file with one per line."},
      {"messages", Type::optional(Type::list(Type::dict())), "null",
       "predict: a conversation ([{role: user, content: ...}, ...]) rendered with the tokenizer's chat template "
       "and continued as the assistant."},
      {"max_new_tokens", Type::integer().min(1), "64", "predict: tokens generated per prompt at most."},
      {"do_sample", Type::boolean(), "false", "predict: sample the next token (false: greedy, the most likely)."},
      {"temperature", Type::real().min(0.0, true), "1.0", "predict, sampling: logits are divided by this."},
      {"top_k", Type::integer().min(0), "50", "predict, sampling: draw among the k most likely tokens (0: all)."},
      {"bucket_size", Type::integer().min(0), "0",
       "predict: attend to the KV cache in buckets of this many positions, a graph per bucket (0: the whole "
       "cache, one graph), as optimum-habana's --bucket_size --bucket_internal."},
      {"reuse_cache", Type::boolean(), "false",
       "predict: allocate the KV cache for prompt + max_new_tokens before the prompt's forward, as optimum-habana's "
       "--reuse_cache (false: the prompt's forward keeps its keys and values at the prompt's length; the cache is "
       "padded to the whole length, a layer at a time, when the first new token arrives, optimum-habana's "
       "default). The same tokens either way; the peak memory differs."},
  };
}

const config::StructSchema& loraSchema() {
  static const config::StructSchema schema{
      "lora",
      "PEFT's LoraConfig.",
      {
          {"r", Type::integer().min(1), "8", "Rank of the update B A."},
          {"lora_alpha", Type::real().min(0.0, true), "8", "The update is scaled by lora_alpha / r."},
          {"lora_dropout", Type::real().min(0.0).max(1.0, true), "0.0", "Dropout on the adapters' input in training."},
          {"target_modules", Type::optional(Type::anyOf({Type::list(Type::string()), Type::string()})), "null",
           "Layers to adapt: names (q_proj matches every ...q_proj), or a regular expression the whole path must "
           "match; null: PEFT's default for the model type (q_proj, v_proj; GPT-2's c_attn; Phi-3 has none)."},
          {"bias", Type::string({"none", "all", "lora_only"}), "none", "Biases that train: none, all, lora_only."},
          {"modules_to_save", Type::optional(Type::list(Type::string())), "null",
           "Modules trained whole and saved with the adapters (a new head)."},
          {"use_rslora", Type::boolean(), "false", "Rank-stabilised LoRA: scale by lora_alpha / sqrt(r)."},
      }};
  return schema;
}

nn::LoraSettings loraSettings(const config::Params& p, Family family) {
  nn::LoraSettings s;
  s.r = p.getInt("r");
  s.lora_alpha = p.getFloat("lora_alpha");
  s.lora_dropout = static_cast<float>(p.getFloat("lora_dropout"));
  if (!p.has("target_modules")) {
    // PEFT's defaults by model type (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING), which has none for Phi-3.
    if (family == Family::kPhi3)
      p.fail("target_modules", "PEFT has no default target_modules for Phi-3: name them (its projections: "
                               "qkv_proj, o_proj, gate_up_proj, down_proj)");
    s.target_modules = family == Family::kGpt2 ? std::vector<std::string>{"c_attn"}
                                                : std::vector<std::string>{"q_proj", "v_proj"};
  } else if (p.node("target_modules").isSequence())
    s.target_modules = p.getStringList("target_modules");
  else
    s.target_modules_regex = p.node("target_modules").str();
  s.bias = p.getString("bias");
  if (p.has("modules_to_save")) s.modules_to_save = p.getStringList("modules_to_save");
  s.use_rslora = p.getBool("use_rslora");
  return s;
}

}  // namespace hpu::core::models
