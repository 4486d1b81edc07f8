#include "job_trace.h"
#include "log_level_scope.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "hpu/core/config/params.h"
#include "hpu/core/estimate/step_recorder.h"
#include "hpu/core/module/pipeline_module.h"

namespace hpu::core::app {
namespace {

using estimate::JobShape;
using estimate::RankTrace;

// Traces run with this much device memory, so a run that does not fit is
// traced to its end and its whole need measured; the real limit is checked
// after.
constexpr std::uint64_t kTraceMemoryLimit = 1ull << 60;

// At most this many classes of ranks are traced (see traceJob).
constexpr std::size_t kMaxTracedClasses = 16;


// The first rank of each class of ranks with identical shards of `buckets`
// over `world` ranks, in order (0 first).
std::vector<int> classStarts(const std::vector<std::int64_t>& buckets, int world) {
  std::vector<int> starts{0};
  for (std::int64_t n : buckets)
    if (const auto extra = static_cast<int>(n % world); extra > 0) starts.push_back(extra);
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  return starts;
}

device::DType matrixDtypeOf(const std::string& precision) {
  if (precision == "fp8") return device::DType::kFloat8E4M3;
  if (precision.rfind("bf16", 0) == 0) return device::DType::kBFloat16;
  if (precision.rfind("16", 0) == 0) return device::DType::kFloat16;
  return device::DType::kFloat32;
}

std::int64_t maxNewTokens(const config::Node& cfg) {
  const config::Node* init = cfg.find("model") ? cfg.find("model")->find("init_args") : nullptr;
  const config::Node* n = init ? init->find("max_new_tokens") : nullptr;
  return n && n->isScalar() ? config::asInt(*n) : 0;
}

}  // namespace

estimate::JobShape jobShapeOf(const RunRequest& run, const Pipeline& pipeline) {
  JobShape s;
  const bool predict = run.subcommand == "predict";
  s.predict = predict;
  s.devices = pipeline.devices;
  s.nodes = static_cast<int>(pipeline.parts.options.num_nodes);
  s.world = pipeline.parts.strategy->worldSize();
  const ops::ParallelGroup* tp = pipeline.parts.strategy->tensorParallelGroup();
  s.stages = pipeline.parts.strategy->pipelineStages();
  s.tensor_parallel = tp ? tp->size() : 1;
  s.replicas = s.world / (s.tensor_parallel * s.stages);
  s.accumulate = pipeline.parts.options.accumulate_grad_batches;
  s.strategy = pipeline.parts.strategy->name();
  const data::Split split = predict ? data::Split::kPredict : data::Split::kTrain;
  s.micro_batch = pipeline.data->loaderOptions(split).batch_size;
  for (const data::Field& f : pipeline.data->batchFields(split))
    if (f.name == "input_ids") s.tokens_per_sample = f.numel();
  s.max_new_tokens = maxNewTokens(run.config);
  return s;
}

namespace {

// Rank `rank` of the job, under trace settings; fills `shape` and `buckets`
// (its parameter buckets' sizes) when given.
RankTrace traceRank(const RunRequest& run, std::int64_t steps, const device::EmulatorSettings& settings, int rank,
                    JobShape* shape = nullptr, std::vector<std::int64_t>* buckets = nullptr) {
  device::Platform platform(settings);
  Pipeline pipeline = buildPipeline(run, platform, rank);
  const bool predict = run.subcommand == "predict";
  if (shape != nullptr) *shape = jobShapeOf(run, pipeline);

  Trainer trainer(std::move(pipeline.parts));
  if (shape != nullptr) {
    shape->precision = trainer.precision().precision();
    shape->matrix_dtype = matrixDtypeOf(shape->precision);
  }
  device::Device& dev = trainer.device();
  auto recorder = std::make_shared<estimate::StepRecorder>(dev);
  trainer.strategy().observeCollectives(recorder);
  ops::OpObserverScope observe(recorder.get());

  RankTrace t;
  t.rank = rank;
  const auto in_use = [&dev] { return dev.allocator().stats().inUse; };
  std::uint64_t graphs = 0;
  const auto graphs_since = [&] {
    const std::uint64_t now = dev.graph().stats().steps, n = now - graphs;
    graphs = now;
    return static_cast<std::int64_t>(n);
  };
  if (predict) {
    trainer.dryRunPredict(*pipeline.model, *pipeline.data);
    t.weights = in_use();
    t.step = recorder->endStep(graphs_since());
    t.persistent = t.weights;
  } else {
    Trainer::DryRunHooks hooks;
    hooks.model_ready = [&] {
      t.gradients = trainer.gradientDeviceBytes();
      t.weights = in_use() - t.gradients;
    };
    hooks.optimizer_ready = [&] {
      t.optimizer_state = in_use() - t.weights - t.gradients;
      recorder->endStep(graphs_since());  // setup is not a step
    };
    hooks.step_end = [&](std::int64_t) { t.step = recorder->endStep(graphs_since()); };
    trainer.dryRunFit(*pipeline.model, *pipeline.data, steps, hooks);
    t.persistent = in_use();
  }
  trainer.strategy().observeCollectives(nullptr);
  t.peak = dev.allocator().stats().maxInUse;
  t.peak_at = recorder->peakAt();
  // A pipeline stage's parameters (a later stage's copy of a tied embedding
  // counts on the first).
  std::vector<Tensor> shared;
  if (const auto* stages = dynamic_cast<const PipelineModule*>(pipeline.model.get()); stages != nullptr) {
    if (trainer.strategy().pipelineStage() > 0) shared = stages->stageSharedParameters();
    // The model chunks a stage holds, known once the model is built.
    if (shape != nullptr && trainer.strategy().pipelineStages() > 1) shape->virtual_stages = stages->chunks();
  }
  const nn::ParameterCount count = pipeline.model->countParameters(shared);
  t.parameters = count.total;
  t.padding = count.padding;
  if (buckets != nullptr) *buckets = trainer.bucketSizes();
  return t;
}

}  // namespace

device::EmulatorSettings traceSettings(const device::EmulatorSettings& settings) {
  device::EmulatorSettings out = settings;
  out.shapeOnly = true;
  out.recipeCache.reset();
  out.memoryLimit = kTraceMemoryLimit;
  return out;
}

estimate::TracedJob traceJob(const RunRequest& run, std::int64_t steps, const device::EmulatorSettings& settings,
                             TraceScope scope) {
  const device::EmulatorSettings traced = traceSettings(settings);
  estimate::TracedJob job;
  JobShape& shape = job.shape;
  std::vector<RankTrace>& ranks = job.ranks;
  std::vector<std::int64_t> buckets;
  ranks.push_back(traceRank(run, steps, traced, 0, &shape, &buckets));
  if (shape.stages > 1) {
    // Pipeline stages run different parts of the model: one rank of each
    // (its tensor-parallel ranks and each replica's hold the same shapes).
    const bool bounding = scope == TraceScope::kBounding;
    ranks.front().last_rank = shape.tensor_parallel - 1;
    for (int stage = 1; stage < shape.stages; ++stage) {
      if (bounding && stage > 1 && stage + 1 < shape.stages) continue;
      RankTrace t = traceRank(run, steps, traced, stage * shape.tensor_parallel);
      t.stage = stage;
      const int last_stage = bounding && stage == 1 ? std::max(1, shape.stages - 2) : stage;
      t.last_rank = (last_stage + 1) * shape.tensor_parallel - 1;
      ranks.push_back(std::move(t));
    }
    return job;
  }
  if (scope == TraceScope::kBounding) {
    ranks.front().last_rank = shape.world - 1;
    return job;
  }
  // Every rank runs the same graph; they differ only in their shards, a
  // bucket of n elements giving ranks below n % world one element more.
  // The distinct remainders cut the world into classes of identical ranks,
  // and one rank of each is traced. Rank 0 holds the largest shard of every
  // bucket, so its memory bounds every other rank's at every point; past
  // kMaxTracedClasses only the first and last classes are traced.
  const std::vector<int> starts = classStarts(buckets, shape.world);
  ranks.front().last_rank = (starts.size() > 1 ? starts[1] : shape.world) - 1;
  const bool all = starts.size() <= kMaxTracedClasses;
  for (std::size_t c = 1; c < starts.size(); ++c) {
    if (!all && c + 1 < starts.size()) continue;
    RankTrace t = traceRank(run, steps, traced, starts[c]);
    t.last_rank = (c + 1 < starts.size() ? starts[c + 1] : shape.world) - 1;
    ranks.push_back(std::move(t));
  }
  return job;
}

std::uint64_t tracePeak(const RunRequest& run, std::int64_t steps, const device::EmulatorSettings& settings) {
  const LogLevelScope quiet(spdlog::level::warn);
  return traceRank(run, steps, traceSettings(settings), 0).peak;
}

}  // namespace hpu::core::app
