#include "hpu/core/app/estimate.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "hpu/core/app/root.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/module/pipeline_module.h"
#include "hpu/core/base/file_io.h"
#include "hpu/core/config/compose.h"
#include "hpu/core/config/params.h"
#include "hpu/core/config/scalars.h"
#include "hpu/core/estimate/op_costs.h"
#include "hpu/core/estimate/step_recorder.h"
#include "hpu/core/estimate/step_time.h"
#include "hpu/device/byte_size.h"
#include "hpu/device/errors.h"

namespace hpu::core {
namespace {

using estimate::StepRecorder;
using estimate::StepTime;
using nlohmann::json;

// Traces run with this much device memory, so a run that does not fit is
// traced to its end and its whole need measured; the real limit is checked
// after.
constexpr std::uint64_t kTraceMemoryLimit = 1ull << 60;

// Every constant the estimate rests on: the Gaudi model's and the pricing's.
std::vector<device::Assumption> assumptionsOf(const device::GaudiModel& model) {
  std::vector<device::Assumption> all = model.assumptions();
  for (device::Assumption& a : estimate::opCostAssumptions()) all.push_back(std::move(a));
  return all;
}

// One traced rank: its memory and its priced step.
struct RankTrace {
  int rank = 0, last_rank = 0;  // the ranks [rank, last_rank] it stands for (identical shards)
  int stage = 0;                // its pipeline stage (with pipeline parallelism: and each replica's ranks of it)
  std::uint64_t weights = 0, optimizer_state = 0, gradients = 0;  // persistent, by kind
  std::uint64_t persistent = 0, peak = 0;
  std::string peak_at;
  StepTime step;
  std::vector<estimate::OpTotal> ops;
  std::int64_t total_params = 0;
  std::vector<std::int64_t> buckets;  // parameter bucket sizes
};

// At most this many classes of ranks are traced (see runEstimate).
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

// What the traced job looks like, from rank 0's trace.
struct JobShape {
  int devices = 1, nodes = 1, world = 1;
  int replicas = 1;  // data-parallel: ranks that read different batches (tensor-parallel ranks and stages share theirs)
  int stages = 1, tensor_parallel = 1;
  std::int64_t accumulate = 1, micro_batch = 1, tokens_per_sample = 0, max_new_tokens = 0;
  std::string strategy, precision;
  device::DType matrix_dtype = device::DType::kFloat32;
};

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

RankTrace traceRank(const EstimateRequest& request, const device::EmulatorSettings& settings, int rank,
                    JobShape& shape) {
  device::Platform platform(settings);
  Pipeline pipeline = buildPipeline(request.run, platform, rank);
  const bool predict = request.run.subcommand == "predict";
  shape.devices = pipeline.devices;
  shape.nodes = static_cast<int>(pipeline.parts.options.num_nodes);
  shape.world = pipeline.parts.strategy->worldSize();
  const ops::ParallelGroup* tp = pipeline.parts.strategy->tensorParallelGroup();
  shape.stages = pipeline.parts.strategy->pipelineStages();
  shape.tensor_parallel = tp ? tp->size() : 1;
  shape.replicas = shape.world / (shape.tensor_parallel * shape.stages);
  shape.accumulate = pipeline.parts.options.accumulate_grad_batches;
  shape.strategy = pipeline.parts.strategy->name();
  const data::Split split = predict ? data::Split::kPredict : data::Split::kTrain;
  shape.micro_batch = pipeline.data->loaderOptions(split).batch_size;
  for (const data::Field& f : pipeline.data->batchFields(split))
    if (f.name == "input_ids") shape.tokens_per_sample = f.numel();
  shape.max_new_tokens = maxNewTokens(request.run.config);

  Trainer trainer(std::move(pipeline.parts));
  shape.precision = trainer.precision().precision();
  shape.matrix_dtype = matrixDtypeOf(shape.precision);
  device::Device& dev = trainer.device();
  auto recorder = std::make_shared<StepRecorder>(dev);
  trainer.strategy().observeCollectives(recorder);
  ops::OpObserverScope observe(recorder.get());

  RankTrace t;
  t.rank = rank;
  estimate::RecordedStep step;  // the last
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
    step = recorder->endStep(graphs_since());
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
    hooks.step_end = [&](std::int64_t) { step = recorder->endStep(graphs_since()); };
    trainer.dryRunFit(*pipeline.model, *pipeline.data, request.steps, hooks);
    t.persistent = in_use();
  }
  if (predict) t.persistent = t.weights;
  trainer.strategy().observeCollectives(nullptr);
  t.peak = dev.allocator().stats().maxInUse;
  t.peak_at = recorder->peakAt();
  estimate::PricedStep priced =
      estimate::priceStep(step, device::GaudiModel(platform.settings().generation, {shape.devices, shape.nodes}));
  t.step = priced.time;
  t.ops = std::move(priced.ops);
  t.total_params = pipeline.model->numParameters();
  // A pipeline stage's parameters (a later stage's copy of a tied embedding
  // counts on the first).
  if (const auto* stages = dynamic_cast<const PipelineModule*>(pipeline.model.get());
      stages != nullptr && trainer.strategy().pipelineStage() > 0)
    for (const Tensor& shared : stages->stageSharedParameters()) t.total_params -= shared.numel();
  t.buckets = trainer.bucketSizes();
  return t;
}

std::string gib(std::uint64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1ull << 30)); }

// A change that may make a run fit: what it is, and its settings (dotted
// keys and YAML values, as on the command line).
struct Change {
  std::string what;
  std::vector<std::pair<std::string, std::string>> settings;
};

EstimateRequest withChange(const EstimateRequest& request, const Change& change) {
  EstimateRequest out = request;
  std::vector<std::string> problems;
  for (const auto& [key, value] : change.settings)
    config::applyOverride(out.run.config, config::rootType(), {key, config::Node::scalar(value)}, problems);
  if (!problems.empty()) throw UsageError(problems.front());
  return out;
}

// Rank 0's peak under `change` (rank 0 holds the larger shards), traced
// quietly.
std::uint64_t peakWith(const EstimateRequest& request, const device::EmulatorSettings& settings, const Change& change) {
  const spdlog::level::level_enum level = spdlog::get_level();
  spdlog::set_level(spdlog::level::warn);
  JobShape ignored;
  try {
    const std::uint64_t peak = traceRank(withChange(request, change), settings, 0, ignored).peak;
    spdlog::set_level(level);
    return peak;
  } catch (...) {
    spdlog::set_level(level);
    throw;
  }
}

const config::Node* configAt(const config::Node& root, std::initializer_list<std::string_view> path) {
  const config::Node* n = &root;
  for (std::string_view key : path)
    if (n == nullptr || !(n = n->find(key))) return nullptr;
  return n;
}

// What would make a run that does not fit fit, each change traced again
// (a trace takes a fraction of a second): a ZeRO stage, offload,
// activation checkpointing, and the largest micro-batch (prompt batch for
// predict) that fits.
std::vector<std::string> suggestions(const EstimateRequest& request, const device::EmulatorSettings& settings,
                                     const JobShape& s, std::uint64_t limit) {
  std::vector<std::string> out;
  const bool predict = request.run.subcommand == "predict";
  const auto verdict = [&](std::uint64_t peak) {
    return fmt::format("peak {} ({})", gib(peak), peak <= limit ? "fits" : "does not fit");
  };
  const auto tryChange = [&](const Change& c) {
    try {
      out.push_back(fmt::format("{}: {}", c.what, verdict(peakWith(request, settings, c))));
    } catch (const std::exception& e) {
      spdlog::debug("estimate: could not trace '{}': {}", c.what, e.what());
    }
  };
  const config::Node& cfg = request.run.config;
  if (!predict) {
    // A strategy named by alias moves to the next ZeRO stage, then to offload.
    const config::Node* strategy = configAt(cfg, {"trainer", "strategy"});
    const std::string name = strategy && strategy->isScalar() ? strategy->str() : "";
    const bool deepspeed = name.find("deepspeed") != std::string::npos;
    if (!name.empty() && (!deepspeed || name.find("offload") == std::string::npos)) {
      std::vector<std::string> next;
      if (s.world > 1 && name.find("stage_3") == std::string::npos) next.push_back("hpu_deepspeed_stage_3");
      next.push_back(s.world > 1 ? "hpu_deepspeed_stage_3_offload" : "hpu_deepspeed_stage_2_offload");
      for (const std::string& n : next) tryChange({fmt::format("trainer.strategy: {}", n), {{"trainer.strategy", n}}});
    }
    const config::Node* checkpointing = configAt(cfg, {"model", "init_args", "gradient_checkpointing"});
    if (checkpointing && checkpointing->isScalar() && config::parseBool(checkpointing->str()) != true)
      tryChange({"model.init_args.gradient_checkpointing: true", {{"model.init_args.gradient_checkpointing", "true"}}});
  }
  // The largest batch under the current one that fits (the peak grows with
  // the batch): a binary search.
  if (configAt(cfg, {"data", "init_args", "batch_size"}) && s.micro_batch > 1) {
    const auto change = [&](std::int64_t b) {
      Change c{fmt::format("data.init_args.batch_size: {}", b), {{"data.init_args.batch_size", std::to_string(b)}}};
      if (!predict && (s.micro_batch * s.accumulate) % b == 0) {
        const std::int64_t accumulate = s.micro_batch * s.accumulate / b;
        c.what += fmt::format(", trainer.accumulate_grad_batches: {} (the same global batch)", accumulate);
        c.settings.emplace_back("trainer.accumulate_grad_batches", std::to_string(accumulate));
      }
      return c;
    };
    std::int64_t lo = 0, hi = s.micro_batch;  // lo fits (0: none known), hi does not
    std::uint64_t lo_peak = 0, hi_peak = 0;
    try {
      while (hi - lo > 1) {
        const std::int64_t mid = lo + (hi - lo) / 2;
        const std::uint64_t peak = peakWith(request, settings, change(mid));
        (peak <= limit ? lo : hi) = mid;
        (peak <= limit ? lo_peak : hi_peak) = peak;
      }
      if (lo > 0)
        out.push_back(fmt::format("{}: {}", change(lo).what, verdict(lo_peak)));
      else if (hi == 1)
        out.push_back(fmt::format("{}: {}", change(1).what, verdict(hi_peak)));
    } catch (const std::exception& e) {
      spdlog::debug("estimate: could not trace a smaller batch: {}", e.what());
    }
  }
  return out;
}

// Rank `r`'s step time by the calibration parameter that bounds each part:
// an op's time goes to the efficiency of the resource that bounds it (its
// host-link part to the link), the host's per-graph time and the exposed
// communication (each blocking collective's overhead apart) to theirs.
std::vector<std::pair<std::string, double>> stepShares(const RankTrace& r, const device::GaudiModel& model) {
  const device::Calibration& c = model.calibration();
  std::map<std::string, double> by;
  for (const estimate::OpTotal& o : r.ops) {
    const device::GaudiModel::Priced p = model.price(o.work);
    const double calls = static_cast<double>(o.calls);
    using Bound = device::GaudiModel::Bound;
    switch (p.bound) {
      case Bound::kMme: by["mme_efficiency"] += calls * p.engines; break;
      case Bound::kAttention: by["attention_efficiency"] += calls * p.engines; break;
      case Bound::kTpc: by["tpc_efficiency"] += calls * p.engines; break;
      case Bound::kHbm: by["hbm_efficiency"] += calls * p.engines; break;
      case Bound::kNone: break;
    }
    if (p.host > 0) by["host link and memory (specs)"] += calls * p.host;
  }
  const double overhead = static_cast<double>(r.step.blocking_collective_peers) * c.collective_overhead;
  by["collective_overhead"] += std::min(overhead, r.step.breakdown.exposed_comm);
  by["collective_efficiency"] += std::max(0.0, r.step.breakdown.exposed_comm - overhead);
  by["host_per_graph"] += r.step.breakdown.host;
  if (r.step.breakdown.pipeline_bubble > 0) by["pipeline bubble"] += r.step.breakdown.pipeline_bubble;
  std::vector<std::pair<std::string, double>> out(by.begin(), by.end());
  std::erase_if(out, [](const auto& p) { return p.second <= 0; });
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

// The rank whose step sets the job's: rank 0, or with pipeline stages the
// slowest stage's.
const RankTrace& stepRank(const std::vector<RankTrace>& ranks, const JobShape& shape) {
  if (shape.stages == 1) return ranks.front();
  return *std::max_element(ranks.begin(), ranks.end(),
                           [](const RankTrace& a, const RankTrace& b) { return a.step.seconds < b.step.seconds; });
}

// The step time of the job traced in `ranks`, whose step rank (stepRank) is
// `timed`: its step; with pipeline stages, plus 1F1B's bubble: each of the stages - 1
// other stages idles one micro-batch's forward and backward of the slowest
// stage while the pipeline fills and drains (Narayanan et al., "Efficient
// Large-Scale Language Model Training on GPU Clusters", 2021: bubble =
// (p - 1) / m of the ideal time). The matrix engine's work is a rank's on
// average.
StepTime stepOf(const std::vector<RankTrace>& ranks, const RankTrace& timed, const JobShape& shape) {
  StepTime out = timed.step;
  if (shape.stages == 1) return out;
  double flops = 0, busiest = 0;
  for (const RankTrace& r : ranks) {
    flops += r.step.matrix_flops;
    const estimate::StepBreakdown& b = r.step.breakdown;
    busiest = std::max(busiest, b.matrix + b.vector + b.host);
  }
  out.matrix_flops = flops / static_cast<double>(ranks.size());
  out.breakdown.pipeline_bubble =
      static_cast<double>(shape.stages - 1) * busiest / static_cast<double>(std::max<std::int64_t>(1, shape.accumulate));
  out.seconds = out.breakdown.total();
  return out;
}

}  // namespace

int runEstimate(const EstimateRequest& request) {
  device::Env env;
  for (const auto& [k, v] : request.run.env) env.set(k, v);
  device::EmulatorSettings settings = device::loadEmulatorSettings(env);
  const device::MemoryLimit limit = device::memoryLimitOf(settings);
  settings.shapeOnly = true;
  settings.recipeCache.reset();
  settings.memoryLimit = kTraceMemoryLimit;
  const bool predict = request.run.subcommand == "predict";

  JobShape shape;
  std::vector<RankTrace> ranks;
  ranks.push_back(traceRank(request, settings, 0, shape));
  if (shape.stages > 1) {
    // Pipeline stages run different parts of the model: one rank of each
    // (its tensor-parallel ranks and each replica's hold the same shapes).
    ranks.front().last_rank = shape.tensor_parallel - 1;
    for (int stage = 1; stage < shape.stages; ++stage) {
      JobShape ignored;
      RankTrace t = traceRank(request, settings, stage * shape.tensor_parallel, ignored);
      t.stage = stage;
      t.last_rank = (stage + 1) * shape.tensor_parallel - 1;
      ranks.push_back(std::move(t));
    }
  } else {
    // Every rank runs the same graph; they differ only in their shards, a
    // bucket of n elements giving ranks below n % world one element more.
    // The distinct remainders cut the world into classes of identical ranks,
    // and one rank of each is traced. Rank 0 holds the largest shard of every
    // bucket, so its memory bounds every other rank's at every point; past
    // kMaxTracedClasses only the first and last classes are traced.
    const std::vector<int> starts = classStarts(ranks.front().buckets, shape.world);
    ranks.front().last_rank = (starts.size() > 1 ? starts[1] : shape.world) - 1;
    const bool all = starts.size() <= kMaxTracedClasses;
    for (std::size_t c = 1; c < starts.size(); ++c) {
      if (!all && c + 1 < starts.size()) continue;
      JobShape ignored;
      RankTrace t = traceRank(request, settings, starts[c], ignored);
      t.last_rank = (c + 1 < starts.size() ? starts[c + 1] : shape.world) - 1;
      ranks.push_back(std::move(t));
    }
  }
  const RankTrace& timed = stepRank(ranks, shape);  // its ops are the step's
  const StepTime st = stepOf(ranks, timed, shape);
  // With pipeline stages, each traced rank holds its stage's parameters.
  if (shape.stages > 1)
    for (std::size_t i = 1; i < ranks.size(); ++i) ranks.front().total_params += ranks[i].total_params;

  const RankTrace& r0 = ranks.front();
  const std::string timed_name = shape.stages > 1 ? fmt::format("rank {}, stage {}", timed.rank, timed.stage) : "rank 0";
  const device::GaudiModel model(settings.generation, {shape.devices, shape.nodes});
  std::uint64_t peak = 0;
  for (const RankTrace& r : ranks) peak = std::max(peak, r.peak);
  const bool fits = peak <= limit.bytes;
  const double seconds = st.seconds;
  const double samples = static_cast<double>(shape.micro_batch) * (predict ? 1 : shape.accumulate) * shape.replicas;
  const bool tokens = shape.tokens_per_sample > 0;
  const double per_sample =
      predict ? static_cast<double>(shape.max_new_tokens) : static_cast<double>(shape.tokens_per_sample);
  const double throughput = seconds > 0 ? samples * (tokens ? per_sample : 1.0) / seconds : 0;
  const double mfu = seconds > 0 ? st.matrix_flops / (seconds * model.matrixPeakFlops(shape.matrix_dtype)) : 0;

  // ---- the table
  const device::DeviceSpec& spec = model.spec();
  std::string out = fmt::format("Estimate: {} on {} x {} ({} node(s) x {}), {}, {}\n", predict ? "predict" : "fit",
                                shape.world, spec.product, shape.nodes, shape.devices, shape.strategy, shape.precision);
  out += fmt::format("  parameters            {}\n", r0.total_params);
  if (predict)
    out += fmt::format("  batch                 {} prompts of {} tokens, {} new tokens each, per {}\n",
                       shape.micro_batch, shape.tokens_per_sample, shape.max_new_tokens,
                       shape.replicas == shape.world ? "rank" : "data-parallel replica");
  else
    out += fmt::format("  batch                 micro {} x accumulation {} x {} {}{}\n", shape.micro_batch,
                       shape.accumulate, shape.replicas == shape.world ? "world" : "data-parallel replicas",
                       shape.replicas, tokens ? fmt::format(" x {} tokens", shape.tokens_per_sample) : std::string());
  out +=
      fmt::format("  step time             {:.4f} s{}\n", seconds, predict ? " (prefill and every decode step)" : "");
  const auto share = [&](double s) {
    return fmt::format("{:.4f} s ({:4.1f}%)", s, seconds > 0 ? 100 * s / seconds : 0);
  };
  out += fmt::format("    matrix engine       {}\n    vector engine       {}\n    exposed comm        {}\n",
                     share(st.breakdown.matrix), share(st.breakdown.vector), share(st.breakdown.exposed_comm));
  out += fmt::format("    optimizer           {}\n    offload / host link {}\n    host                {}\n",
                     share(st.breakdown.optimizer), share(st.breakdown.offload), share(st.breakdown.host));
  if (shape.stages > 1)
    out += fmt::format("    pipeline bubble     {} ({} stages, {} micro-batches in 1F1B)\n",
                       share(st.breakdown.pipeline_bubble), shape.stages, shape.accumulate);
  out += fmt::format("  communication         {:.4f} s in {} collectives (overlapped or not)\n", st.comm_seconds,
                     st.collectives);
  out += fmt::format("  throughput            {:.0f} {}/s{}\n", throughput, tokens ? "tokens" : "samples",
                     predict && tokens ? " (generated)" : "");
  // How far off it may be: the leave-one-out errors of the published runs most like this one.
  using Mode = device::ValidationRow::Mode;
  const device::ValidationRow like{predict ? (shape.max_new_tokens <= 1 ? Mode::kLatency : Mode::kInference)
                                           : Mode::kTraining,
                                   shape.tokens_per_sample,
                                   predict ? shape.max_new_tokens : 0,
                                   shape.micro_batch * (predict ? 1 : shape.accumulate * shape.replicas),
                                   shape.world,
                                   0};
  const device::Uncertainty spread = tokens ? device::uncertaintyFor(settings.generation, like) : device::Uncertainty{};
  if (spread.rows > 0)
    out += fmt::format("    likely range        {:.0f} .. {:.0f} {}/s (this estimate over the leave-one-out ratios "
                       "{:.2f} .. {:.2f} of the {} published {} runs most like it)\n",
                       throughput / spread.high, throughput / spread.low, "tokens", spread.low, spread.high,
                       spread.rows, spec.name, like.mode == Mode::kTraining ? "training" : "inference");
  out +=
      fmt::format("  MFU                   {:.1f}% of the {} peak\n", 100 * mfu, device::dtypeName(shape.matrix_dtype));
  out += fmt::format("  device memory limit   {} ({})\n", gib(limit.bytes), limit.source);
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const RankTrace& r = ranks[i];
    if (i > 0 && ranks[i - 1].last_rank + 1 < r.rank)
      out += fmt::format("  ranks {}-{}          between the ranks above and below (not traced)\n",
                         ranks[i - 1].last_rank + 1, r.rank - 1);
    std::string who =
        r.last_rank > r.rank ? fmt::format("ranks {}-{}", r.rank, r.last_rank) : fmt::format("rank {}", r.rank);
    if (shape.stages > 1) who += fmt::format(" stage {}", r.stage);
    out += fmt::format("  {:<21} peak {} at {}\n", who, gib(r.peak), r.peak_at);
    out += fmt::format(
        "                        persistent {} (weights {}, optimizer state {}, gradients {}), "
        "activations {}\n",
        gib(r.persistent), gib(r.weights), gib(r.optimizer_state), gib(r.gradients), gib(r.peak - r.persistent));
  }
  out += fmt::format("  fits                  {}\n", fits ? "yes" : "NO");
  const std::vector<std::string> changes =
      fits ? std::vector<std::string>{} : suggestions(request, settings, shape, limit.bytes);
  for (const std::string& s : changes) out += "    try " + s + "\n";
  out += fmt::format("  most expensive ops ({}, one step):\n", timed_name);
  for (std::size_t i = 0; i < std::min<std::size_t>(10, timed.ops.size()); ++i) {
    const estimate::OpTotal& o = timed.ops[i];
    out += fmt::format("    {:>9.3f} ms  {:>5}x  {} {}\n", 1e3 * o.seconds, o.calls, o.op, o.operands);
  }
  if (request.verbose) {
    out += "  assumptions:\n";
    for (const device::Assumption& a : assumptionsOf(model))
      out += fmt::format("    {:<24} {:>10.4g} {:<24} {}\n", a.name, a.value, a.unit, a.source);
    out += fmt::format("  the step's time by the parameter that bounds it ({}):\n", timed_name);
    for (const auto& [name, part] : stepShares(timed, model))
      out += fmt::format("    {:<24} {:>9.4f} s {:5.1f}%\n", name, part,
                         timed.step.seconds > 0 ? 100 * part / timed.step.seconds : 0);
  }
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);

  // ---- the JSON
  if (!request.json_path.empty()) {
    json j;
    j["subcommand"] = predict ? "predict" : "fit";
    j["generation"] = std::string(spec.name);
    j["world_size"] = shape.world;
    j["step_time_s"] = seconds;
    j[tokens ? "tokens_per_s" : "samples_per_s"] = throughput;
    if (spread.rows > 0) j["tokens_per_s_range"] = {throughput / spread.high, throughput / spread.low};
    j["mfu"] = mfu;
    j["total_params"] = r0.total_params;
    j["peak_device_memory_bytes"] = peak;
    j["device_memory_limit_bytes"] = limit.bytes;
    j["fits"] = fits;
    j["breakdown"] = {{"matrix_engine_s", st.breakdown.matrix},      {"vector_engine_s", st.breakdown.vector},
                      {"exposed_comm_s", st.breakdown.exposed_comm}, {"optimizer_s", st.breakdown.optimizer},
                      {"offload_s", st.breakdown.offload},           {"host_s", st.breakdown.host},
                      {"pipeline_bubble_s", st.breakdown.pipeline_bubble}};
    // One entry per class of identical ranks: the ranks it stands for.
    j["per_rank"] = json::array();
    for (const RankTrace& r : ranks)
      j["per_rank"].push_back({{"rank", r.rank},
                               {"ranks", {r.rank, r.last_rank}},
                               {"pipeline_stage", r.stage},
                               {"peak_bytes", r.peak},
                               {"peak_at", r.peak_at},
                               {"persistent_bytes", r.persistent},
                               {"weights_bytes", r.weights},
                               {"optimizer_state_bytes", r.optimizer_state},
                               {"gradients_bytes", r.gradients},
                               {"activations_bytes", r.peak - r.persistent}});
    // Every op of the step's rank (rank 0; with pipeline stages, the slowest
    // stage's), most expensive first; top_ops are the first 10.
    j["ops"] = json::array();
    // With each op's work per call at every efficiency 1 (GaudiModel::seconds
    // prices it), from which bench/estimate/calibrate.py recomputes the step
    // under other efficiencies.
    const auto matrix_kind = [](device::Work::Matrix m) {
      return m == device::Work::Matrix::kAttention ? "attention" : "product";
    };
    for (const estimate::OpTotal& o : timed.ops)
      j["ops"].push_back({{"op", o.op},
                          {"operands", o.operands},
                          {"calls", o.calls},
                          {"seconds", o.seconds},
                          {"work",
                           {{"mme_s", o.work.mme},
                            {"matrix", matrix_kind(o.work.matrix)},
                            {"tpc_s", o.work.tpc},
                            {"hbm_s", o.work.hbm},
                            {"host_link_s", o.work.host_link},
                            {"host_memory_s", o.work.host_memory}}}});
    j["graphs"] = st.graphs;
    j["blocking_collectives"] = st.blocking_collectives;
    j["blocking_collective_peers"] = st.blocking_collective_peers;
    j["calibration"] = {{"mme", model.calibration().mme},
                        {"attention", model.calibration().attention},
                        {"tpc", model.calibration().tpc},
                        {"hbm", model.calibration().hbm},
                        {"collective", model.calibration().collective},
                        {"collective_overhead", model.calibration().collective_overhead},
                        {"host_per_graph", model.calibration().host_per_graph}};
    j["top_ops"] = json::array();
    for (std::size_t i = 0; i < std::min<std::size_t>(10, timed.ops.size()); ++i) j["top_ops"].push_back(j["ops"][i]);
    j["assumptions"] = json::object();
    for (const device::Assumption& a : assumptionsOf(model))
      j["assumptions"][a.name] = {{"value", a.value}, {"unit", a.unit}, {"source", a.source}};
    if (!fits) j["suggestions"] = changes;
    writeFileAtomically(request.json_path, j.dump(2) + "\n");
  }
  return fits ? 0 : 1;
}

}  // namespace hpu::core
