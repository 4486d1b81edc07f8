#include <spdlog/fmt/fmt.h>

#include "hpu/core/estimate/pricing.h"

#include <algorithm>
#include <map>

#include "hpu/core/estimate/op_costs.h"
#include "hpu/device/check.h"

namespace hpu::core::estimate {
namespace {

// Every constant the estimate rests on: the Gaudi model's and the pricing's.
std::vector<device::Assumption> assumptionsOf(const device::GaudiModel& model) {
  std::vector<device::Assumption> all = model.assumptions();
  for (device::Assumption& a : opCostAssumptions()) all.push_back(std::move(a));
  return all;
}

// A rank's own step (it has no pipeline bubble) by the calibration parameter
// that bounds each part: an op's time goes to the efficiency of the resource
// that bounds it (its host-link part to the link), the host's per-graph time
// and the exposed communication (each blocking collective's overhead apart)
// to theirs.
std::vector<StepShare> stepShares(const PricedStep& step, const device::GaudiModel& model) {
  const device::Calibration& c = model.calibration();
  std::map<std::string, double> by;
  for (const OpTotal& o : step.ops) {
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
  const StepTime& t = step.time;
  const double overhead = static_cast<double>(t.blocking_collective_peers) * c.collective_overhead;
  by["collective_overhead"] += std::min(overhead, t.breakdown.exposed_comm);
  by["collective_efficiency"] += std::max(0.0, t.breakdown.exposed_comm - overhead);
  by["host_per_graph"] += t.breakdown.host;
  std::vector<StepShare> out;
  for (const auto& [parameter, seconds] : by)
    if (seconds > 0) out.push_back({parameter, seconds});
  std::sort(out.begin(), out.end(), [](const StepShare& a, const StepShare& b) { return a.seconds > b.seconds; });
  return out;
}

}  // namespace

std::size_t stepRank(std::span<const StepTime> steps, const JobShape& shape) {
  if (shape.stages == 1) return 0;
  return static_cast<std::size_t>(
      std::max_element(steps.begin(), steps.end(),
                       [](const StepTime& a, const StepTime& b) { return a.seconds < b.seconds; }) -
      steps.begin());
}

double pipelineBubble(double stage_seconds, int stages, int virtual_stages, std::int64_t micro_batches) {
  const auto m = static_cast<double>(std::max<std::int64_t>(1, micro_batches));
  return static_cast<double>(stages - 1) * stage_seconds / (static_cast<double>(std::max(1, virtual_stages)) * m);
}

StepTime interleavedStep(const StepTime& step, int virtual_stages) {
  StepTime out = step;
  const auto v = static_cast<double>(virtual_stages);
  // The bubble's (p - 1) / m of a stage's step, now (p - 1) / (v m).
  out.breakdown.pipeline_bubble = step.breakdown.pipeline_bubble / v;
  // The transfers are exposed communication.
  out.pipeline_transfers = step.pipeline_transfers * v;
  out.breakdown.exposed_comm += out.pipeline_transfers - step.pipeline_transfers;
  out.seconds = out.breakdown.total();
  return out;
}

// With pipeline stages the job's step is the slowest stage's plus the
// bubble (pipelineBubble); the matrix engine's work is a stage's on average.
StepTime jobStep(std::span<const StepTime> steps, std::span<const int> stages_each, const JobShape& shape) {
  HPU_CHECK(!steps.empty() && steps.size() == stages_each.size(), "one stage count per traced rank");
  StepTime out = steps[stepRank(steps, shape)];
  if (shape.stages == 1) return out;
  double flops = 0, busiest = 0, stages = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    flops += steps[i].matrix_flops * stages_each[i];
    stages += stages_each[i];
    const StepBreakdown& b = steps[i].breakdown;
    busiest = std::max(busiest, b.matrix + b.vector + b.host);
  }
  out.matrix_flops = flops / stages;
  out.breakdown.pipeline_bubble = pipelineBubble(busiest, shape.stages, shape.virtual_stages, shape.accumulate);
  out.seconds = out.breakdown.total();
  return out;
}

namespace {

// The likely range of `throughput` tokens/s: how far off the estimate of a
// run like this one was for the published runs most like it.
std::optional<ThroughputRange> rangeOf(const JobShape& shape, device::Generation generation, double throughput) {
  using Mode = device::ValidationRow::Mode;
  const bool predict = shape.predict;
  const device::ValidationRow like{predict ? (shape.max_new_tokens <= 1 ? Mode::kLatency : Mode::kInference)
                                           : Mode::kTraining,
                                   shape.tokens_per_sample,
                                   predict ? shape.max_new_tokens : 0,
                                   shape.micro_batch * (predict ? 1 : shape.accumulate * shape.replicas),
                                   shape.world,
                                   0};
  const device::Uncertainty spread = device::uncertaintyFor(generation, like);
  if (spread.rows == 0) return std::nullopt;
  ThroughputRange r;
  r.low = throughput / spread.high;
  r.high = throughput / spread.low;
  r.ratio_low = spread.low;
  r.ratio_high = spread.high;
  r.rows_low = spread.rows_low;
  r.rows_high = spread.rows_high;
  r.widening = spread.widening;
  r.rows = spread.rows;
  r.training = like.mode == Mode::kTraining;
  r.from = std::string(device::generationName(spread.from));
  const device::ValidationRow& n = spread.nearest;
  r.nearest = fmt::format("{} card{}, {} tokens {}{}, {} {}", n.cards, n.cards == 1 ? "" : "s", n.tokens_in,
                          r.training ? "a sequence" : "in",
                          r.training ? "" : fmt::format(" / {} out", n.tokens_out),
                          r.training ? "global batch" : "batch", n.batch);
  return r;
}

}  // namespace

JobFigures jobFigures(const JobShape& shape, const device::GaudiModel& model, std::span<const StepTime> steps,
                      std::span<const int> stages_each) {
  JobFigures out;
  out.step = jobStep(steps, stages_each, shape);
  const double seconds = out.step.seconds;
  const double samples =
      static_cast<double>(shape.micro_batch) * (shape.predict ? 1 : shape.accumulate) * shape.replicas;
  out.per_token = shape.tokens_per_sample > 0;
  const double per_sample =
      shape.predict ? static_cast<double>(shape.max_new_tokens) : static_cast<double>(shape.tokens_per_sample);
  out.throughput = seconds > 0 ? samples * (out.per_token ? per_sample : 1.0) / seconds : 0;
  if (out.per_token) out.range = rangeOf(shape, model.spec().generation, out.throughput);
  out.mfu = seconds > 0 ? out.step.matrix_flops / (seconds * model.matrixPeakFlops(shape.matrix_dtype)) : 0;
  return out;
}

std::vector<int> stagesEach(const TracedJob& job) {
  std::vector<int> out;
  const int tp = std::max(1, job.shape.tensor_parallel);
  for (const RankTrace& r : job.ranks)
    out.push_back(job.shape.stages > 1 ? std::max(1, (r.last_rank - r.rank + 1) / tp) : 1);
  return out;
}

EstimateResult priceJob(const TracedJob& job, const device::GaudiModel& model, const device::MemoryLimit& limit) {
  const JobShape& shape = job.shape;
  HPU_CHECK(!job.ranks.empty(), "a traced job has at least rank 0");
  HPU_CHECK(model.topology().devicesPerNode == shape.devices && model.topology().numNodes == shape.nodes,
            "the Gaudi model is for another topology than the traced job's");
  std::vector<PricedStep> steps;
  std::vector<StepTime> times;
  for (const RankTrace& r : job.ranks) {
    steps.push_back(priceStep(r.step, model));
    times.push_back(steps.back().time);
  }
  const std::size_t timed = stepRank(times, shape);  // its ops are the step's

  EstimateResult out;
  out.shape = shape;
  out.generation = std::string(model.spec().name);
  out.product = std::string(model.spec().product);
  // With pipeline stages, each traced rank holds its stage's parameters.
  out.parameters = job.ranks.front().parameters;
  if (shape.stages > 1)
    for (std::size_t i = 1; i < job.ranks.size(); ++i) out.parameters += job.ranks[i].parameters;

  const std::vector<int> stages_each = stagesEach(job);
  JobFigures figures = jobFigures(shape, model, times, stages_each);
  out.step = figures.step;
  out.per_token = figures.per_token;
  out.throughput = figures.throughput;
  out.range = figures.range;
  out.mfu = figures.mfu;

  out.limit = limit;
  for (const RankTrace& r : job.ranks) {
    out.peak = std::max(out.peak, r.peak);
    out.ranks.push_back({r.rank, r.last_rank, r.stage, r.peak, r.peak_at, r.persistent, r.weights, r.optimizer_state,
                         r.gradients, r.peak - r.persistent});
  }
  out.fits = out.peak <= limit.bytes;

  out.step_rank = job.ranks[timed].rank;
  out.step_stage = job.ranks[timed].stage;
  out.step_rank_seconds = steps[timed].time.seconds;
  out.step_shares = stepShares(steps[timed], model);
  out.ops = std::move(steps[timed].ops);
  out.calibration = model.calibration();
  out.assumptions = assumptionsOf(model);
  return out;
}

}  // namespace hpu::core::estimate
