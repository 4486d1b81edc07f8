#include "hpu/core/trainer/trainer.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "hpu/comm/fault_injection.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/config/yaml_io.h"
#include "hpu/core/module/pipeline_module.h"
#include "hpu/core/ops/ops.h"
#include "hpu/core/tensor/leaf.h"
#include "hpu/device/numerics.h"
#include "hpu/core/tensor/op_record.h"
#include "hpu/device/check.h"
#include "metric_collector.h"

namespace hpu::core {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// One stage (fit, validate, ...) as the profiler sees it: set up with the
// run's context, watching this thread's ops and the strategy's collectives,
// and torn down (reporting) by finish(). A stage that fails reports nothing.
class ProfiledStage {
 public:
  ProfiledStage(Profiler& profiler, Strategy& strategy, ProfilerContext context)
      : profiler_(profiler), strategy_(strategy) {
    profiler_.setup(context);
    strategy_.observeCollectives(profiler_.collectiveObserver());
    // A profiler's observer replaces the thread's; without one, an outer
    // observer (a benchmark's) keeps watching.
    if (ops::OpObserver* observer = profiler_.opObserver()) ops_.emplace(observer);
  }
  ~ProfiledStage() { strategy_.observeCollectives(nullptr); }
  void finish() {
    ops_.reset();
    strategy_.observeCollectives(nullptr);
    profiler_.teardown();
  }

 private:
  Profiler& profiler_;
  Strategy& strategy_;
  std::optional<ops::OpObserverScope> ops_;
};

// Moves `tensors` (a module's buffers, its frozen parameters) to `device`
// (every handle to one follows).
void moveTensors(const std::vector<nn::NamedTensor>& tensors, device::Device& device) {
  for (const nn::NamedTensor& b : tensors) {
    const Tensor& t = b.tensor;
    auto storage =
        std::make_shared<device::Buffer>(device.allocator().allocate(t.dtype(), static_cast<std::size_t>(t.numel())));
    if (!device.shapeOnly() && t.dtype() == DType::kInt64)
      std::copy_n(t.labels(), t.numel(), storage->as<std::int64_t>().data());
    else if (!device.shapeOnly())
      std::copy_n(t.data(), t.numel(), storage->as<float>().data());
    Leaf(t).rebind(storage, 0);
  }
}

// Lightning's warning (on global rank 0) when validate or test (`fn`) split
// the data between replicas, padding each one's share.
void warnRepeatedSamples(const Strategy& strategy, bool distributed_sampler, const char* fn) {
  if (!distributed_sampler || !strategy.isGlobalZero() || strategy.samplerFor({}).num_replicas == 1) return;
  spdlog::warn(
      "Using `DistributedSampler` with the dataloaders. During `trainer.{}()`, it is recommended to use "
      "`Trainer(devices=1, num_nodes=1)` to ensure each sample/batch gets evaluated exactly once. Otherwise, "
      "multi-device settings use `DistributedSampler` that replicates some samples to make sure all devices have "
      "same batch size in case of uneven inputs.",
      fn);
}

// Every rank must run as many batches of a loader as every other: training
// all-reduces each step's gradients and evaluation reduces its metrics, so a
// rank with fewer batches would leave the others waiting for a collective it
// never issues. The ranks exchange their counts (`batches`; -1: no such data
// set) and, if any differ, all fail alike, naming them.
void expectSameBatchesOnEveryRank(Strategy& strategy, data::Split split, std::int64_t batches) {
  const int world = strategy.worldSize();
  if (world == 1 || strategy.device().shapeOnly()) return;
  std::vector<double> counts(static_cast<std::size_t>(world), 0.0);
  counts[static_cast<std::size_t>(strategy.globalRank())] = static_cast<double>(batches);
  strategy.allReduceSum(counts);  // exact: one integer per slot
  if (std::all_of(counts.begin(), counts.end(), [&](double c) { return c == counts.front(); })) return;
  const std::string set = split == data::Split::kVal ? "validation" : std::string(data::splitName(split));
  // Runs of consecutive ranks with the same count: "ranks 0-5: 1, ranks 6-7: 0".
  std::string runs;
  for (int first = 0; first < world;) {
    int last = first;
    while (last + 1 < world && counts[last + 1] == counts[first]) ++last;
    const auto c = static_cast<std::int64_t>(counts[first]);
    runs += fmt::format("{}{} {}: {}", runs.empty() ? "" : ", ", first == last ? "rank" : "ranks",
                        first == last ? std::to_string(first) : fmt::format("{}-{}", first, last),
                        c < 0 ? "no " + set + " set" : std::to_string(c));
    first = last + 1;
  }
  throw DataError(fmt::format(
      "the ranks have different numbers of {} batches ({}): a rank with fewer would leave the others waiting for "
      "collectives it skips. Give every rank the same {} data (the same files on every node); "
      "trainer.use_distributed_sampler=true pads each rank's share of it to the same size",
      set, runs, set));
}

}  // namespace

Trainer::Trainer(TrainerParts parts)
    : options_(std::move(parts.options)),
      strategy_(std::move(parts.strategy)),
      precision_(std::move(parts.precision)),
      checkpoint_io_(std::move(parts.checkpoint_io)),
      profiler_(std::move(parts.profiler)),
      callbacks_(std::move(parts.callbacks)),
      loggers_(std::move(parts.loggers)),
      optimizer_(std::move(parts.optimizer)),
      scheduler_(std::move(parts.scheduler)),
      seed_(parts.seed),
      config_(std::move(parts.config)),
      restart_round_(parts.restart_round),
      metrics_(std::make_unique<MetricCollector>()),
      init_rng_(parts.seed, RandomStream::kInit),
      dropout_rng_(parts.seed, RandomStream::kDropout, static_cast<std::uint64_t>(strategy_->dataParallelRank())) {
  if (!profiler_) profiler_ = std::make_unique<PassThroughProfiler>();
  if (!precision_) precision_ = makePrecisionPlugin("32-true");
  if (!checkpoint_io_) checkpoint_io_ = checkpoint::makeHPUCheckpointIO();
}

Trainer::~Trainer() = default;

ProfilerContext Trainer::profilerContext(const char* stage) {
  return {stage, strategy_->globalRank(), strategy_->worldSize(), logDir(), &strategy_->device()};
}

std::string Trainer::logDir() const {
  if (!loggers_.empty()) return loggers_.front()->logDir();
  return options_.default_root_dir;
}

void Trainer::notifyException(const std::exception& error) {
  for (auto& c : callbacks_) {
    try {
      c->onException(*this, error);
    } catch (const std::exception& secondary) {
      spdlog::warn("{}.onException: {}", c->stateKey(), secondary.what());
    }
  }
}

void Trainer::logMetrics(std::map<std::string, double> metrics, std::int64_t step) {
  if (!isGlobalZero() || metrics.empty()) return;
  metrics["epoch"] = static_cast<double>(current_epoch_);
  for (auto& l : loggers_) l->logMetrics(metrics, step);
}

// ---------------------------------------------------------------- setup

void Trainer::setupModel(LightningModule& model, data::DataModule& data, data::Stage stage) {
  stage_ = stage;
  data_ = &data;
  if (!dryRun())
    data.setup(stage);
  else
    data.setupTokenizer();  // the model sizes its vocabulary by it; no sample is read
  if (model_ready_) return;
  model_ = &model;
  std::shared_ptr<const data::Dataset> sample;
  std::vector<data::Field> fields;
  if (dryRun()) {
    fields = data.batchFields(stage == data::Stage::kPredict ? data::Split::kPredict : data::Split::kTrain);
  } else {
    for (data::Split s : {data::Split::kTrain, data::Split::kVal, data::Split::kTest, data::Split::kPredict})
      if (!sample) sample = data.dataset(s);
    // Predict may run on the model's own data (a language model's prompts).
    if (!sample && stage != data::Stage::kPredict)
      throw UsageError("the data module provides no data set for this stage");
    if (sample) fields = sample->fields();
  }
  ModelInput input{fields.empty() ? Shape{} : Shape(std::span<const std::int64_t>(fields.front().shape)),
                   data.numClasses(), fields, data.tokenizer()};
  device::Device& dev = strategy_->device();
  precision_->checkDevice(dev);
  // A partitioning strategy's model is built in host memory: a device of the
  // same kind without a memory limit, kept for the trainer's life.
  if (strategy_->partitionsParameters() && !host_staging_) {
    device::DeviceOptions host;
    host.memoryLimit = {std::numeric_limits<std::uint64_t>::max(), "host memory"};
    host.shapeOnly = dev.shapeOnly();
    host_staging_ = std::make_unique<device::Device>(-1, -1, dev.spec().generation, host);
  }
  device::Device& build_on = strategy_->partitionsParameters() ? *host_staging_ : dev;
  nn::InitContext ctx{
      build_on, init_rng_, dropout_rng_, precision_->paramDtype(), strategy_->activationCheckpointsOnHost(), seed_};
  ctx.defer_trainable_values = strategy_->partitionsParameters();
  ctx.tensor_parallel = strategy_->tensorParallelGroup();
  ctx.vocab_divisible_by = strategy_->vocabDivisibleBy();
  ctx.expert_parallel = strategy_->expertParallelGroup();
  ctx.sequence_parallel = strategy_->sequenceParallel();
  if (const int stages = strategy_->pipelineStages(); stages > 1) {
    if (dynamic_cast<PipelineModule*>(&model) == nullptr)
      throw UsageError(fmt::format("trainer.strategy.init_args.pipeline_parallel_size={}: {} has no decoder layers to "
                                   "split into pipeline stages; pipeline parallelism runs the decoder language "
                                   "models (LlamaForCausalLM, GPT2LMHeadModel, AutoModelForCausalLM, ...)",
                                   stages, model.typeName()));
    if (stage == data::Stage::kPredict)
      throw UsageError(fmt::format("predict with trainer.strategy.init_args.pipeline_parallel_size={}: generation "
                                   "runs every layer on each rank; predict with tensor_parallel_size (and "
                                   "pipeline_parallel_size 1), which reads this run's checkpoints as well",
                                   stages));
    ctx.pipeline_stages = stages;
    ctx.pipeline_stage = strategy_->pipelineStage();
    ctx.pipeline_layers = strategy_->pipelineLayers();
    ctx.virtual_stages = strategy_->pipelineVirtualStages();
  }
  model.configureModel(ctx, input);
  precision_->convertModule(model);
  // Gradients exist for training only (evaluation and prediction allocate none).
  params_ = std::make_unique<nn::FlatParameters>(model, build_on, strategy_->bucketCapBytes(),
                                                 strategy_->persistentGradients() && stage == data::Stage::kFit,
                                                 strategy_->gradientDtype());
  // Buffers and frozen parameters are not sharded: each rank holds them whole.
  std::vector<nn::NamedTensor> unsharded = model.namedBuffers();
  unsharded.insert(unsharded.end(), params_->frozen().begin(), params_->frozen().end());
  if (&build_on != &dev) moveTensors(unsharded, dev);
  strategy_->setupParameters(model, *params_, unsharded);
  if (&build_on != &dev) {
    params_->moveTo(dev);
    HPU_CHECK(host_staging_->allocator().stats().inUse == 0, "{} bytes of the model left in host memory",
              host_staging_->allocator().stats().inUse);
  }
  // Once nothing of the model is left in host staging (an error may end the setup here).
  for (nn::Module* m : nn::modulesOfClasses(model, strategy_->recomputedLayerClasses(),
                                            "trainer.strategy.init_args.activation_checkpointing_policy"))
    m->recomputeInBackward(&dropout_rng_);
  if (ctx.defer_trainable_values && !dev.shapeOnly()) fillDeferredParameters(model);
  model.attachTrainer(metrics_.get(), profiler_.get(), dev);
  model_ready_ = true;
}

// Each rank's shard of every bucket: the model fills the part of each
// parameter that falls in it, reading only that part of its files.
void Trainer::fillDeferredParameters(LightningModule& model) {
  const std::vector<optim::ParamSlice> slices = strategy_->optimizerSlices(*params_);
  const std::vector<Strategy::SliceShard> shards = strategy_->optimizerShards(*params_);
  for (std::size_t i = 0; i < params_->buckets().size(); ++i) {
    const nn::ParamBucket& b = params_->buckets()[i];
    const std::int64_t lo = shards[i].offset, hi = lo + shards[i].size;
    for (std::size_t j = 0; j < b.members.size(); ++j) {
      const std::int64_t start = b.offsets[j], end = start + b.members[j].tensor.numel();
      const std::int64_t from = std::max(start, lo), to = std::min(end, hi);
      if (from >= to) continue;
      const std::span<float> out(slices[i].values + (from - lo), static_cast<std::size_t>(to - from));
      if (model.fillDeferredParameter(b.members[j], from - start, out) &&
          (b.dtype == DType::kBFloat16 || b.dtype == DType::kFloat16))
        device::roundInPlace(out, b.dtype);
    }
  }
  model.deferredParametersFilled();
}

// This rank's pipeline stage run on micro-batches, as the strategy's
// schedule asks: each micro-batch's forward records on a tape of its own,
// kept until its backward.
class Trainer::StageRun final : public PipelineWork {
 public:
  // (batch, batch_idx) of each micro-batch, in order.
  using MicroBatches = std::vector<std::pair<Batch, std::int64_t>>;
  StageRun(Trainer& trainer, MicroBatches micro, bool training)
      : t_(trainer),
        stage_(dynamic_cast<PipelineModule&>(*trainer.model_)),
        micro_(std::move(micro)),
        training_(training),
        chunks_(stage_.chunks()),
        tapes_(micro_.size() * static_cast<std::size_t>(chunks_)),
        inputs_(tapes_.size()),
        outputs_(tapes_.size()) {}

  std::size_t size() const { return micro_.size(); }

  int chunks() const override { return chunks_; }
  PipelineModule::StageInput input(std::size_t i) override { return stage_.stageInput(micro_[i].first); }
  Tensor forward(std::size_t i, int chunk, const Tensor& input) override {
    // Every chunk of a micro-batch draws the same forward's dropout streams.
    if (training_) t_.reseedDropout(micro_[i].second);
    Tensor in = input;
    if (training_ && in.defined()) in.setRequiresGrad(true);
    const std::size_t k = slot(i, chunk);
    {
      autograd::TapeScope scope(training_ ? &tapes_[k] : nullptr);
      auto autocast = t_.precision_->forwardContext();
      inputs_[k] = in;
      outputs_[k] = stage_.forwardStage(micro_[i].first, in, chunk);
    }
    if (training_ && t_.strategy_->pipelineStage() + 1 == t_.strategy_->pipelineStages() && chunk + 1 == chunks_)
      t_.requireTrainableLoss(outputs_[k], "forwardStage", tapes_[k]);
    return outputs_[k];
  }
  Tensor backward(std::size_t i, int chunk, const Tensor& grad) override {
    const std::size_t k = slot(i, chunk);
    if (grad.defined())
      tapes_[k].backward(outputs_[k], grad);
    else
      tapes_[k].backward(outputs_[k],
                         t_.precision_->lossScale() / static_cast<float>(t_.options_.accumulate_grad_batches));
    Tensor input_grad = inputs_[k].defined() ? inputs_[k].grad() : Tensor();
    inputs_[k] = outputs_[k] = Tensor();
    return input_grad;
  }
  void start(std::string_view phase) override { t_.profiler_->start(phase); }
  void stop(std::string_view phase) override { t_.profiler_->stop(phase); }

 private:
  std::size_t slot(std::size_t i, int chunk) const { return i * static_cast<std::size_t>(chunks_) + static_cast<std::size_t>(chunk); }

  Trainer& t_;
  PipelineModule& stage_;
  MicroBatches micro_;
  bool training_;
  int chunks_;
  std::vector<autograd::Tape> tapes_;
  std::vector<Tensor> inputs_, outputs_;
};

int Trainer::modelChunks() const {
  const auto* stage = dynamic_cast<const PipelineModule*>(model_);
  return stage != nullptr && strategy_->pipelineStages() > 1 ? stage->chunks() : 1;
}

double Trainer::forwardStages(const Batch& batch, std::int64_t batch_idx) {
  StageRun run(*this, {{batch, batch_idx}}, /*training=*/false);
  return strategy_->runPipeline(run, 1, /*backward=*/false).front();
}

void Trainer::recordOutputShapes() {
  std::shared_ptr<const data::Dataset> dataset;
  for (data::Split split : {data::Split::kTrain, data::Split::kVal, data::Split::kTest, data::Split::kPredict})
    if (!dataset) dataset = data_->dataset(split);
  if (!dataset || dataset->size() == 0 || dryRun()) return;
  data::DataLoader one(std::move(dataset), data::LoaderOptions{.batch_size = 1});
  one.startEpoch(0);
  Batch batch;
  {
    ops::GraphRecordingPause no_graph;
    batch = toDevice(*one.next());
  }
  ops::GraphRecordingPause no_graph;
  autograd::TapeScope no_grad(nullptr);
  GatheredParameters gathered(*strategy_, *params_, Strategy::GatherScope::kStep);
  model_->eval();
  if (strategy_->pipelineStages() > 1) {
    forwardStages(batch, 0);
  } else {
    auto autocast = precision_->forwardContext();
    (*model_)(nn::Inputs{batch});
  }
  model_->train();
}

std::unique_ptr<optim::LRScheduler> Trainer::replaceScheduler(std::unique_ptr<optim::LRScheduler> scheduler) {
  HPU_CHECK(optimizer_ != nullptr, "replaceScheduler before the optimizer is set up");
  if (scheduler) scheduler->attach(*optimizer_);
  std::swap(scheduler, scheduler_);
  return scheduler;
}

void Trainer::setLearningRate(double lr) {
  HPU_CHECK(optimizer_ != nullptr, "setLearningRate before the optimizer is set up");
  optimizer_->resetLr(lr);
  if (scheduler_) scheduler_->attach(*optimizer_);
}

void Trainer::runTrainingSteps(std::int64_t steps, const std::function<double(std::int64_t)>& lr_at,
                               const std::function<bool(std::int64_t, double)>& after) {
  std::int64_t step = 0;
  bool go_on = num_train_batches_ > 0;
  StepWindow window;
  for (std::int64_t epoch = current_epoch_; go_on && step < steps; ++epoch) {
    train_loader_->startEpoch(epoch);
    model_->train();
    for (std::int64_t batch_idx = 0; go_on && step < steps && batch_idx < num_train_batches_; ++batch_idx) {
      const std::optional<data::HostBatch> hb = train_loader_->next();
      if (!hb) break;
      const Batch batch = toDevice(*hb);
      train_batch_size_ = batch.size();
      const bool optimizer_turn =
          (batch_idx + 1) % options_.accumulate_grad_batches == 0 || batch_idx + 1 == num_train_batches_;
      optimizer_->setLr(lr_at(step));
      try {
        trainStep(window, batch, batch_idx, optimizer_turn);
      } catch (...) {
        tape_.clear();
        strategy_->device().graph().discardStep();
        metrics_->clear();
        progress_metrics_.clear();
        throw;
      }
      strategy_->device().graph().markStep();
      metrics_->takeStepMetrics();
      if (!optimizer_turn) continue;
      const auto it = progress_metrics_.find("loss");
      const double mine = it == progress_metrics_.end() ? std::nan("") : it->second;
      const double loss = std::stod(strategy_->broadcast(fmt::format("{:.17g}", mine), 0));
      go_on = after(step, loss);
      ++step;
    }
  }
  metrics_->takeEpochMetrics(*strategy_);
  progress_metrics_.clear();
}

void Trainer::runValidationSteps(std::int64_t batches) {
  if (!val_loader_ || batches <= 0) return;
  const std::int64_t n = std::min(batches, val_loader_->numBatches());
  model_->eval();
  {
    autograd::TapeScope no_grad(nullptr);
    GatheredParameters gathered(*strategy_, *params_, Strategy::GatherScope::kStep);
    val_loader_->startEpoch(0);
    try {
      for (std::int64_t batch_idx = 0; batch_idx < n; ++batch_idx) {
        const std::optional<data::HostBatch> hb = val_loader_->next();
        if (!hb) break;
        const Batch batch = toDevice(*hb);
        metrics_->setHook(MetricCollector::Hook::kEvaluation, batch.size());
        if (strategy_->pipelineStages() > 1) {
          forwardStages(batch, batch_idx);
        } else {
          auto autocast = precision_->forwardContext();
          model_->validationStep(batch, batch_idx);
        }
        strategy_->device().graph().markStep();
      }
    } catch (...) {
      strategy_->device().graph().discardStep();
      metrics_->setHook(MetricCollector::Hook::kNone, 1);
      metrics_->clear();
      model_->train();
      throw;
    }
  }
  metrics_->setHook(MetricCollector::Hook::kNone, 1);
  metrics_->clear();
  model_->train();
}

void Trainer::parametersReplaced() {
  strategy_->parametersLoaded(*params_);
  if (optimizer_) optimizer_->parametersLoaded();
}

void Trainer::forwardTrainingData() {
  std::unique_ptr<data::DataLoader> loader = makeLoader(*data_, data::Split::kTrain);
  loader->startEpoch(current_epoch_);
  model_->train();
  for (std::int64_t i = 0; i < num_train_batches_; ++i) {
    const std::optional<data::HostBatch> hb = loader->next();
    if (!hb) break;
    const Batch batch = toDevice(*hb);
    {
      autograd::TapeScope no_grad(nullptr);
      GatheredParameters gathered(*strategy_, *params_, Strategy::GatherScope::kStep);
      auto autocast = precision_->forwardContext();
      (*model_)(nn::Inputs{batch});
    }
    strategy_->device().graph().markStep();
  }
}

// The config's optimizer (LightningCLI's optimizer:) wins over the model's
// configureOptimizers, which wins over the strategy's own config (a
// DeepSpeed config's optimizer / scheduler), as the seeds say.
void Trainer::configureOptimizers() {
  if (!optimizer_) {
    try {
      OptimizerConfig oc = model_->configureOptimizers();
      optimizer_ = std::move(oc.optimizer);
      if (!scheduler_) scheduler_ = std::move(oc.scheduler);
    } catch (const UsageError&) {
      optimizer_ = strategy_->configuredOptimizer();
      if (!optimizer_) throw;
    }
  }
  if (!scheduler_) scheduler_ = strategy_->configuredScheduler();
  strategy_->checkOptimizer(*optimizer_);
  // The scheduler first: it may set the momentum (OneCycleLR), which decides
  // the state the optimizer allocates (SGD's momentum buffer).
  if (scheduler_) scheduler_->attach(*optimizer_);
  optimizer_->attach(strategy_->optimizerSlices(*params_), strategy_->device(), strategy_->offloadOptimizerState());
  param_group_.clear();
  for (const auto& p : model_->namedParameters())
    if (p.tensor.requiresGrad() && params_->bucketed(p.tensor)) param_group_[Leaf(p.tensor).id()] = 0;
  applyParamGroups();
}

void Trainer::freezeParameters(const std::vector<Tensor>& params) {
  HPU_CHECK(optimizer_ != nullptr, "freezeParameters before the optimizer is set up");
  for (Tensor t : params) {
    t.setRequiresGrad(false);
    param_group_.erase(Leaf(t).id());
  }
  applyParamGroups();
}

std::size_t Trainer::addParamGroup(const std::vector<Tensor>& params, double lr) {
  HPU_CHECK(optimizer_ != nullptr, "addParamGroup before the optimizer is set up");
  const std::size_t group = optimizer_->addGroup(lr);
  for (Tensor t : params) {
    HPU_CHECK(!paramGroupOf(t), "addParamGroup: a parameter already in group {}", *paramGroupOf(t));
    t.setRequiresGrad(true);
    param_group_[Leaf(t).id()] = group;
  }
  applyParamGroups();
  return group;
}

std::optional<std::size_t> Trainer::paramGroupOf(const Tensor& param) const {
  const auto it = param_group_.find(Leaf(param).id());
  if (it == param_group_.end()) return std::nullopt;
  return it->second;
}

// Each optimizer slice is this rank's part [offset, offset + size) of a
// bucket; a parameter's elements in it are stepped by its group.
void Trainer::applyParamGroups() {
  const auto& buckets = params_->buckets();
  const bool all_in_group_0 =
      std::all_of(buckets.begin(), buckets.end(), [&](const nn::ParamBucket& b) {
        return std::all_of(b.members.begin(), b.members.end(), [&](const nn::NamedTensor& m) {
          const auto group = paramGroupOf(m.tensor);
          return group && *group == 0;
        });
      });
  if (all_in_group_0) {
    optimizer_->setGroupRanges({});
    return;
  }
  const auto shards = strategy_->optimizerShards(*params_);
  std::vector<std::vector<optim::GroupRange>> ranges(shards.size());
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const nn::ParamBucket& b = buckets[i];
    for (std::size_t j = 0; j < b.members.size(); ++j) {
      const auto group = paramGroupOf(b.members[j].tensor);
      if (!group) continue;
      const std::int64_t begin = std::max(b.offsets[j], shards[i].offset);
      const std::int64_t end = std::min(b.offsets[j] + b.members[j].tensor.numel(), shards[i].offset + shards[i].size);
      if (begin >= end) continue;
      auto& r = ranges[i];
      if (!r.empty() && r.back().group == *group && r.back().offset + r.back().numel == begin - shards[i].offset)
        r.back().numel += end - begin;
      else
        r.push_back({begin - shards[i].offset, end - begin, *group});
    }
  }
  optimizer_->setGroupRanges(std::move(ranges));
}

std::unique_ptr<data::DataLoader> Trainer::makeLoader(data::DataModule& data, data::Split split,
                                                      std::shared_ptr<const data::Dataset> dataset) {
  if (!dataset) dataset = data.dataset(split);
  if (!dataset) {
    expectSameBatchesOnEveryRank(*strategy_, split, -1);
    return nullptr;
  }
  data::LoaderOptions o = data.loaderOptions(split);
  if (options_.overfit && split == data::Split::kTrain && o.sampler.shuffle) {
    // As Lightning: the overfitted batches are the same ones every epoch.
    if (isGlobalZero() && !overfit_warned_)
      spdlog::warn("You requested to overfit but enabled training dataloader shuffling. We are turning off the "
                   "training dataloader shuffling for you.");
    overfit_warned_ = true;
    o.sampler.shuffle = false;
  }
  if (options_.use_distributed_sampler && strategy_->worldSize() > 1) {
    o.sampler = strategy_->samplerFor(o.sampler);
    // As torch's DistributedSampler under Lightning: every split pads each
    // rank's share by repeating samples from the start (training may drop
    // the tail instead), so every rank runs the same number of batches.
    // Evaluation metrics then count the repeated samples; rank 0's share
    // (what the prediction writer writes) is never padded.
    o.sampler.drop_last = split == data::Split::kTrain ? o.drop_last : false;
  }
  auto loader = std::make_unique<data::DataLoader>(dataset, o);
  expectSameBatchesOnEveryRank(*strategy_, split, loader->numBatches());
  return loader;
}

Batch Trainer::toDevice(const data::HostBatch& hb) {
  device::Device& dev = strategy_->device();
  Batch b;
  // One h2d record per (up to) four fields: the copies of one batch.
  constexpr std::size_t kPerRecord = 4;
  for (std::size_t first = 0; first < hb.tensors.size(); first += kPerRecord) {
    const std::size_t last = std::min(first + kPerRecord, hb.tensors.size());
    std::vector<Shape> shapes;
    std::vector<device::OperandInfo> operands;
    for (std::size_t i = first; i < last; ++i) shapes.emplace_back(std::span<const std::int64_t>(hb.tensors[i].shape));
    for (std::size_t i = first; i < last; ++i)
      operands.push_back({shapes[i - first].dims(), hb.tensors[i].field.dtype});
    const ops::OpRecord op_record(dev, "h2d", operands);
    for (std::size_t i = first; i < last; ++i) {
      const data::HostTensor& t = hb.tensors[i];
      b.set(t.field.name, t.field.dtype == DType::kInt64 ? Tensor::fromHost(dev, shapes[i - first], t.ints)
                                                         : Tensor::fromHost(dev, shapes[i - first], t.floats));
    }
  }
  precision_->convertInput(b);
  return b;
}

// ---------------------------------------------------------------- fit

void Trainer::fit(LightningModule& model, data::DataModule& data, const std::string& ckpt_path) {
  start_time_ = std::chrono::steady_clock::now();
  ProfiledStage profiled(*profiler_, *strategy_, profilerContext("fit"));
  {
    auto s = profiler_->profile("setup");
    setupModel(model, data, data::Stage::kFit);
    configureOptimizers();
    train_loader_ = makeLoader(data, data::Split::kTrain);
    if (!train_loader_) throw UsageError("the data module has no training set: fit needs one");
    val_loader_ = makeLoader(data, data::Split::kVal);
    num_train_batches_ = options_.limit_train.of(train_loader_->numBatches());
    loaders_epoch_ = 0;
    const std::string path = restart_round_ > 0   ? checkpointAfterRestart(ckpt_path)
                             : ckpt_path.empty() ? ""
                                                 : resolveCheckpointPath(ckpt_path);
    if (!path.empty()) {
      restore(path, /*full=*/true);
      spdlog::info("resumed from {} at epoch {}, global step {}", path, current_epoch_, global_step_);
    }
    if (restart_round_ > 0)
      for (auto& l : loggers_) l->resumeAt(global_step_);
    callbacks([&](Callback& c) { c.setup(*this, data::Stage::kFit); });
    callbacks([&](Callback& c) { c.onFitStart(*this); });
    if (isGlobalZero())
      for (auto& l : loggers_) l->logHyperparams(*config_.find("model")->find("init_args"));
  }
  if (options_.barebones && isGlobalZero())
    spdlog::info("`Trainer(barebones=True)` started running. The progress bar is disabled so you might want to "
                 "manually print the progress in your model.");
  // The sanity check runs at most the validation batches the epochs will run.
  const std::int64_t val_batches = val_loader_ ? options_.limit_val.of(val_loader_->numBatches()) : 0;
  if (val_batches > 0 && options_.num_sanity_val_steps != 0 && global_step_ == 0) {
    auto s = profiler_->profile("sanity_check");
    sanity_checking_ = true;
    callbacks([&](Callback& c) { c.onSanityCheckStart(*this); });
    const std::int64_t n =
        options_.num_sanity_val_steps < 0 ? val_batches : std::min(options_.num_sanity_val_steps, val_batches);
    evaluationLoop(data::Split::kVal, n, /*sanity=*/true);
    callbacks([&](Callback& c) { c.onSanityCheckEnd(*this); });
    sanity_checking_ = false;
  }
  fitLoop();
  endStage();
  profiled.finish();
}

// reload_dataloaders_every_n_epochs: the data module is asked for its
// train and val data again, as Lightning calls train_dataloader() and
// val_dataloader() again.
void Trainer::reloadDataloaders() {
  train_loader_ = makeLoader(*data_, data::Split::kTrain);
  if (!train_loader_) throw UsageError("the data module has no training set: fit needs one");
  val_loader_ = makeLoader(*data_, data::Split::kVal);
  num_train_batches_ = options_.limit_train.of(train_loader_->numBatches());
  loaders_epoch_ = current_epoch_;
  spdlog::debug("reloaded the train and val dataloaders at epoch {}", current_epoch_);
}

bool Trainer::timeUp() const {
  return options_.max_time && std::chrono::steady_clock::now() - start_time_ >= *options_.max_time;
}

void Trainer::fitLoop() {
  const BatchLimit& interval = options_.val_check_interval;
  if (!interval.is_fraction && options_.check_val_every_n_epoch && interval.count > num_train_batches_)
    throw UsageError(fmt::format(
        "trainer.val_check_interval ({}) must be less than or equal to the number of the training batches ({}). If "
        "you want to disable validation set trainer.limit_val_batches to 0.0 instead. If you want to validate based "
        "on the total training batches, set trainer.check_val_every_n_epoch=null.",
        interval.count, num_train_batches_));
  if (isGlobalZero() && !loggers_.empty() && options_.fast_dev_run == 0 &&
      num_train_batches_ < options_.log_every_n_steps)
    spdlog::warn(
        "The number of training batches ({}) is smaller than the logging interval Trainer(log_every_n_steps={}). Set "
        "a lower value for log_every_n_steps if you want to see logs for the training epoch.",
        num_train_batches_, options_.log_every_n_steps);
  // Lightning's words for the limits that end fit.
  const auto reached = [&](const char* limit, std::int64_t value) {
    if (isGlobalZero()) spdlog::info("`Trainer.fit` stopped: `{}={}` reached.", limit, value);
  };
  while (true) {
    if (options_.max_steps >= 0 && global_step_ >= options_.max_steps) {
      reached("max_steps", options_.max_steps);
      break;
    }
    if (options_.max_epochs >= 0 && current_epoch_ >= options_.max_epochs) {
      reached("max_epochs", options_.max_epochs);
      break;
    }
    if (timeUp()) break;
    if (should_stop_ && current_epoch_ >= options_.min_epochs && global_step_ >= options_.min_steps) break;
    should_stop_ = false;
    const std::int64_t reload_every = options_.reload_dataloaders_every_n_epochs;
    if (reload_every > 0 && current_epoch_ - loaders_epoch_ >= reload_every) reloadDataloaders();
    trainEpoch();
  }
}

void Trainer::trainEpoch() {
  auto epoch_scope = profiler_->profile("run_training_epoch");
  train_loader_->startEpoch(current_epoch_);
  model_->train();
  callbacks([&](Callback& c) { c.onTrainEpochStart(*this); });
  const std::int64_t interval = options_.val_check_interval.is_fraction
                                    ? std::max<std::int64_t>(1, options_.val_check_interval.of(num_train_batches_))
                                    : options_.val_check_interval.count;
  // Without check_val_every_n_epoch, val_check_interval counts batches across epochs.
  const std::optional<std::int64_t>& every_n_epochs = options_.check_val_every_n_epoch;
  const bool val_this_epoch = val_loader_ && (!every_n_epochs || (current_epoch_ + 1) % *every_n_epochs == 0);
  const std::int64_t batches_before = every_n_epochs ? 0 : current_epoch_ * num_train_batches_;
  const auto stop_requested = [&] {
    return should_stop_ && current_epoch_ >= options_.min_epochs && global_step_ >= options_.min_steps;
  };
  const std::int64_t val_batches = val_loader_ ? options_.limit_val.of(val_loader_->numBatches()) : 0;
  StepWindow window;
  for (std::int64_t batch_idx = 0; batch_idx < num_train_batches_; ++batch_idx) {
    std::optional<data::HostBatch> hb;
    {
      auto s = profiler_->profile("get_train_batch");
      hb = train_loader_->next();
    }
    if (!hb) break;
    if (batch_idx < skip_batches_) continue;  // resuming inside an epoch
    comm::faultPoint(comm::FaultSite::kStep, global_step_, strategy_->globalRank());  // tests' HPU_FAULT
    auto batch_scope = profiler_->profile("run_training_batch");
    Batch batch = toDevice(*hb);
    train_batch_size_ = batch.size();
    callbacks([&](Callback& c) { c.onTrainBatchStart(*this, batch_idx); });
    const bool last = batch_idx + 1 == num_train_batches_;
    const bool optimizer_turn = (batch_idx + 1) % options_.accumulate_grad_batches == 0 || last;
    const bool stepped = trainStep(window, batch, batch_idx, optimizer_turn);
    strategy_->device().graph().markStep();
    std::map<std::string, double> step_metrics = metrics_->takeStepMetrics();
    for (const auto& [k, v] : step_metrics) {
      callback_metrics_[k] = v;
      if (metrics_->inProgressBar(k)) progress_metrics_[k] = v;
    }
    if (stepped) {
      if (scheduler_ && scheduler_->interval() == optim::LRScheduler::Interval::kStep) scheduler_->step();
      if (global_step_ % options_.log_every_n_steps == 0) logMetrics(step_metrics, global_step_ - 1);
    }
    batch_in_epoch_ = batch_idx + 1;
    callbacks([&](Callback& c) { c.onTrainBatchEnd(*this, batch_idx); });
    // As Lightning: validation every `interval` batches, and when asked to
    // stop (early stopping, max_time), but not when max_steps ends the epoch.
    const bool step_limit = options_.max_steps >= 0 && global_step_ >= options_.max_steps;
    const bool out_of_time = timeUp();
    if (val_this_epoch && val_batches > 0 &&
        ((batches_before + batch_idx + 1) % interval == 0 || out_of_time || stop_requested())) {
      evaluationLoop(data::Split::kVal, val_batches, /*sanity=*/false);
      model_->train();
    }
    if (step_limit || out_of_time || stop_requested()) break;
  }
  skip_batches_ = 0;
  std::map<std::string, double> epoch_metrics = metrics_->takeEpochMetrics(*strategy_);
  for (const auto& [k, v] : epoch_metrics) {
    callback_metrics_[k] = v;
    if (metrics_->inProgressBar(k)) progress_metrics_[k] = v;
  }
  logMetrics(epoch_metrics, global_step_ - 1);
  if (scheduler_ && scheduler_->interval() == optim::LRScheduler::Interval::kEpoch) {
    std::optional<double> metric;
    const std::string monitor = scheduler_->monitor();
    if (!monitor.empty()) {
      auto it = callback_metrics_.find(monitor);
      if (it == callback_metrics_.end())
        throw UsageError(fmt::format("lr_scheduler {} monitors '{}', which was not logged; logged metrics: {}",
                                     scheduler_->name(), monitor, [&] {
                                       std::string names;
                                       for (const auto& [k, v] : callback_metrics_)
                                         names += (names.empty() ? "" : ", ") + k;
                                       return names.empty() ? std::string("none") : names;
                                     }()));
      metric = it->second;
    }
    scheduler_->step(metric);
  }
  epoch_completed_ = true;
  callbacks([&](Callback& c) { c.onTrainEpochEnd(*this); });
  epoch_completed_ = false;
  batch_in_epoch_ = 0;
  ++current_epoch_;
}

std::int64_t Trainer::epochTrainingBatches() const {
  if (options_.max_steps < 0) return num_train_batches_;
  const std::int64_t steps_left = std::max<std::int64_t>(0, options_.max_steps - global_step_);
  return std::min(num_train_batches_, skip_batches_ + steps_left * options_.accumulate_grad_batches);
}

void Trainer::reseedDropout(std::int64_t batch_idx) {
  // Dropout masks are a pure function of (seed, rank, epoch, batch): the same
  // after a resume, whatever was drawn before.
  dropout_rng_ =
      Generator(seed_, RandomStream::kDropout,
                (static_cast<std::uint64_t>(strategy_->dataParallelRank()) << 48) ^
                    (static_cast<std::uint64_t>(current_epoch_) << 24) ^ static_cast<std::uint64_t>(batch_idx));
}

bool Trainer::trainStep(StepWindow& window, const Batch& batch, std::int64_t batch_idx, bool optimizer_turn) {
  const bool stages = strategy_->pipelineStages() > 1;
  if (stages) {
    window.emplace_back(batch, batch_idx);
    if (!optimizer_turn) return false;
  }
  // With stages the window runs now, all of it: the whole step in one schedule.
  const StepWindow micro_batches = std::exchange(window, {});
  const Strategy::MicroBatch micro{.first = stages || batch_idx % options_.accumulate_grad_batches == 0,
                                   .last = optimizer_turn};
  if (micro.first) params_->invalidateGrads();
  GatheredParameters gathered(*strategy_, *params_, Strategy::GatherScope::kStep);
  params_->beginStep();
  strategy_->beforeBackward(*params_, micro);
  std::vector<double> losses;
  {
    std::optional<autograd::AnomalyDetection> anomaly;
    if (options_.detect_anomaly) anomaly.emplace();
    std::optional<ops::SyncBatchNormScope> sync_batchnorm;
    if (options_.sync_batchnorm && strategy_->worldSize() > 1)
      sync_batchnorm.emplace([this](std::span<double> sums) { strategy_->allReduceSum(sums); });
    if (stages) {
      StageRun run(*this, micro_batches, /*training=*/true);
      auto s = profiler_->profile("pipeline_schedule");
      losses = strategy_->runPipeline(run, run.size(), /*backward=*/true);
    } else {
      losses.push_back(runMicroBatch(batch, batch_idx));
    }
  }
  {
    // Waiting for the gradient reduction (all-reduce, or ZeRO's reduce-scatter).
    std::optional<Profiler::Scope> s;
    if (strategy_->worldSize() > 1 && optimizer_turn) s.emplace(*profiler_, "allreduce");
    strategy_->afterBackward(*params_, micro);
  }
  if (stages)
    for (std::size_t i = 0; i < losses.size(); ++i) {
      metrics_->setHook(MetricCollector::Hook::kTraining, micro_batches[i].first.size());
      if (!dryRun()) dynamic_cast<PipelineModule&>(*model_).logLoss("train", losses[i]);
    }
  if (!dryRun()) progress_metrics_["loss"] = losses.back();
  if (!optimizer_turn) return false;
  return optimizerStep();
}

double Trainer::runMicroBatch(const Batch& batch, std::int64_t batch_idx) {
  metrics_->setHook(MetricCollector::Hook::kTraining, batch.size());
  reseedDropout(batch_idx);
  Tensor loss;
  {
    autograd::TapeScope scope(&tape_);
    auto autocast = precision_->forwardContext();
    auto s = profiler_->profile("training_step");
    loss = model_->trainingStep(batch, batch_idx);
  }
  requireTrainableLoss(loss, "trainingStep", tape_);
  {
    auto s = profiler_->profile("backward");
    tape_.backward(loss, precision_->lossScale() / static_cast<float>(options_.accumulate_grad_batches));
  }
  return loss.shapeOnly() ? std::nan("") : loss.item();
}

void Trainer::requireTrainableLoss(const Tensor& loss, const char* step, autograd::Tape& tape) const {
  if (loss.defined() && loss.requiresGrad()) return;
  tape.clear();
  throw UsageError(model_->typeName() + "." + step + " returned " +
                   (loss.defined() ? "a loss that does not depend on any parameter" : "no loss"));
}

bool Trainer::optimizerStep() {
  const optim::GradientView grads = strategy_->gradients(*params_);
  if (!dryRun())
    precision_->beforeOptimizerStep(
        {.gather_text = [this](const std::string& text) { return strategy_->gatherText(text); },
         .max = [this](std::span<double> values) { strategy_->allReduceMax(values); }});
  // A dry run's gradients have no values to unscale, check or clip.
  if (!dryRun() && !precision_->prepareStep(grads)) return false;
  if (!dryRun()) clipGradients(grads);
  {
    auto s = profiler_->profile("optimizer_step");
    optimizer_->step();
  }
  strategy_->afterOptimizerStep(*params_);
  ++global_step_;
  return true;
}

// torch.nn.utils.clip_grad_norm_ / clip_grad_value_ over the gradients the
// optimizer uses (the global norm spans every rank's shards).
void Trainer::clipGradients(const optim::GradientView& grads) {
  if (!options_.gradient_clip_val) return;
  const auto limit = static_cast<float>(*options_.gradient_clip_val);
  if (options_.clip_by_value) {
    for (std::span<float> span : grads.spans)
      for (float& g : span) g = std::clamp(g, -limit, limit);
    return;
  }
  const double norm = optim::gradientNorm(grads);
  spdlog::debug("gradient_clip_val {}: the gradients' total norm is {:.17g}", limit, norm);
  const double coef = static_cast<double>(limit) / (norm + 1e-6);
  if (coef >= 1.0) return;
  const auto c = static_cast<float>(coef);
  for (std::span<float> span : grads.spans)
    for (float& g : span) g *= c;
}

// ---------------------------------------------------------------- evaluation

std::map<std::string, double> Trainer::evaluationLoop(data::Split split, std::int64_t max_batches, bool sanity) {
  const bool val = split == data::Split::kVal;
  std::unique_ptr<data::DataLoader> owned;
  data::DataLoader* loader = val ? val_loader_.get() : nullptr;
  if (!loader) {
    owned = makeLoader(*data_, split);
    loader = owned.get();
  }
  if (!loader) throw UsageError(fmt::format("the data module has no {} set", data::splitName(split)));
  const std::int64_t n = std::min(max_batches, loader->numBatches());
  num_eval_batches_ = n;
  auto loop_scope = profiler_->profile(val ? "run_validation" : "run_test");
  model_->eval();
  autograd::TapeScope no_grad(nullptr);
  GatheredParameters gathered(*strategy_, *params_, Strategy::GatherScope::kStep);
  callbacks([&](Callback& c) { val ? c.onValidationStart(*this) : c.onTestStart(*this); });
  loader->startEpoch(0);
  for (std::int64_t batch_idx = 0; batch_idx < n; ++batch_idx) {
    auto hb = loader->next();
    if (!hb) break;
    Batch batch = toDevice(*hb);
    metrics_->setHook(MetricCollector::Hook::kEvaluation, batch.size());
    callbacks(
        [&](Callback& c) { val ? c.onValidationBatchStart(*this, batch_idx) : c.onTestBatchStart(*this, batch_idx); });
    if (strategy_->pipelineStages() > 1) {
      auto s = profiler_->profile(val ? "validation_step" : "test_step");
      const double loss = forwardStages(batch, batch_idx);
      if (!dryRun()) dynamic_cast<PipelineModule&>(*model_).logLoss(val ? "val" : "test", loss);
    } else {
      auto autocast = precision_->forwardContext();
      auto s = profiler_->profile(val ? "validation_step" : "test_step");
      val ? model_->validationStep(batch, batch_idx) : model_->testStep(batch, batch_idx);
    }
    strategy_->device().graph().markStep();
    callbacks(
        [&](Callback& c) { val ? c.onValidationBatchEnd(*this, batch_idx) : c.onTestBatchEnd(*this, batch_idx); });
  }
  std::map<std::string, double> out = metrics_->takeEpochMetrics(*strategy_);
  metrics_->takeStepMetrics();
  metrics_->setHook(MetricCollector::Hook::kNone, 1);
  if (!sanity) {
    for (const auto& [k, v] : out) {
      callback_metrics_[k] = v;
      if (metrics_->inProgressBar(k)) progress_metrics_[k] = v;
    }
    logMetrics(out, stage_ == data::Stage::kFit ? global_step_ - 1 : global_step_);
  }
  callbacks([&](Callback& c) { val ? c.onValidationEnd(*this) : c.onTestEnd(*this); });
  return out;
}

// The setup every evaluation stage shares: the model, its weights from
// ckpt_path, the callbacks, and the loader of `split` (if given; a data
// module without that split is an error).
std::unique_ptr<data::DataLoader> Trainer::setupEvaluation(LightningModule& model, data::DataModule& data,
                                                           const std::string& ckpt_path, data::Stage stage,
                                                           std::optional<data::Split> split) {
  auto s = profiler_->profile("setup");
  setupModel(model, data, stage);
  if (const std::string path = ckpt_path.empty() ? "" : resolveCheckpointPath(ckpt_path); !path.empty())
    restore(path, /*full=*/false);
  callbacks([&](Callback& c) { c.setup(*this, stage); });
  if (!split) return nullptr;
  // A model may bring its predict data (a language model's prompts).
  auto loader = makeLoader(data, *split, *split == data::Split::kPredict ? model.predictData() : nullptr);
  if (!loader) throw UsageError(fmt::format("the data module has no {} set", data::splitName(*split)));
  return loader;
}

void Trainer::loadWeights(LightningModule& model, data::DataModule& data, const std::string& ckpt_path) {
  setupModel(model, data, data::Stage::kPredict);
  const std::string path = resolveCheckpointPath(ckpt_path);
  if (path.empty()) throw UsageError("--ckpt_path " + ckpt_path + ": no checkpoint to load");
  restore(path, /*full=*/false);
}

void Trainer::endStage() {
  auto s = profiler_->profile("teardown");
  if (stage_ == data::Stage::kFit) callbacks([&](Callback& c) { c.onFitEnd(*this); });
  precision_->onRunEnd(isGlobalZero(), [this](std::span<double> values) { strategy_->allReduceMax(values); });
  for (auto& l : loggers_) l->finalize(/*succeeded=*/true);
}

std::map<std::string, double> Trainer::validate(LightningModule& model, data::DataModule& data,
                                                const std::string& ckpt_path) {
  ProfiledStage profiled(*profiler_, *strategy_, profilerContext("validate"));
  setupEvaluation(model, data, ckpt_path, data::Stage::kValidate, std::nullopt);
  warnRepeatedSamples(*strategy_, options_.use_distributed_sampler, "validate");
  auto out =
      evaluationLoop(data::Split::kVal, options_.limit_val.of(std::numeric_limits<std::int64_t>::max() / 2), false);
  endStage();
  profiled.finish();
  if (isGlobalZero()) printResults(out, "Validate");
  return out;
}

std::map<std::string, double> Trainer::test(LightningModule& model, data::DataModule& data,
                                            const std::string& ckpt_path) {
  ProfiledStage profiled(*profiler_, *strategy_, profilerContext("test"));
  auto loader = setupEvaluation(model, data, ckpt_path, data::Stage::kTest, data::Split::kTest);
  warnRepeatedSamples(*strategy_, options_.use_distributed_sampler, "test");
  auto out = evaluationLoop(data::Split::kTest, options_.limit_test.of(loader->numBatches()), false);
  endStage();
  profiled.finish();
  if (isGlobalZero()) printResults(out, "Test");
  return out;
}

std::vector<Prediction> Trainer::predict(LightningModule& model, data::DataModule& data, const std::string& ckpt_path) {
  ProfiledStage profiled(*profiler_, *strategy_, profilerContext("predict"));
  auto loader = setupEvaluation(model, data, ckpt_path, data::Stage::kPredict, data::Split::kPredict);
  const std::int64_t n = options_.limit_predict.of(loader->numBatches());
  num_eval_batches_ = n;
  predict_samples_ = loader->dataset().size();
  std::optional<Profiler::Scope> loop_scope;
  loop_scope.emplace(*profiler_, "run_predict");
  model.eval();
  autograd::TapeScope no_grad(nullptr);
  GatheredParameters gathered(*strategy_, *params_, Strategy::GatherScope::kStep);
  callbacks([&](Callback& c) { c.onPredictStart(*this); });
  loader->startEpoch(0);
  std::vector<Prediction> outputs;
  for (std::int64_t batch_idx = 0; batch_idx < n; ++batch_idx) {
    auto hb = loader->next();
    if (!hb) break;
    Batch batch = toDevice(*hb);
    callbacks([&](Callback& c) { c.onPredictBatchStart(*this, batch_idx); });
    {
      auto autocast = precision_->forwardContext();
      auto s = profiler_->profile("predict_step");
      outputs.push_back(model.predictStep(batch, batch_idx));
    }
    strategy_->device().graph().markStep();
    callbacks([&](Callback& c) { c.onPredictBatchEnd(*this, outputs.back(), batch_idx); });
  }
  callbacks([&](Callback& c) { c.onPredictEnd(*this); });
  loop_scope.reset();
  endStage();
  profiled.finish();
  return outputs;
}

// ---------------------------------------------------------------- reporting

void Trainer::printResults(const std::map<std::string, double>& metrics, const char* stage) const {
  if (metrics.empty()) return;
  const std::string rule(60, '-');
  std::string out =
      rule + "\n" + fmt::format("{:>22}{:>30}\n", std::string(stage) + " metric", "DataLoader 0") + rule + "\n";
  for (const auto& [k, v] : metrics) out += fmt::format("{:>22}{:>30.10g}\n", k, v);
  out += rule + "\n";
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace hpu::core
