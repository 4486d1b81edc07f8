#include <spdlog/fmt/fmt.h>

#include <algorithm>

#include "hpu/core/estimate/report.h"

namespace hpu::core::estimate {
namespace {

std::string gib(std::uint64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1ull << 30)); }

// The rank whose ops the report lists: "rank 0", or "rank 6, stage 3".
std::string stepRankName(const EstimateResult& r) {
  return r.shape.stages > 1 ? fmt::format("rank {}, stage {}", r.step_rank, r.step_stage) : "rank 0";
}

}  // namespace

std::string describe(const FitChange& change) {
  return fmt::format("{}: peak {} ({})", change.what, gib(change.peak), change.fits ? "fits" : "does not fit");
}

std::string textReport(const EstimateResult& r, bool verbose) {
  const JobShape& shape = r.shape;
  const bool predict = shape.predict;
  const StepTime& st = r.step;
  const double seconds = st.seconds;
  std::string out = fmt::format("Estimate: {} on {} x {} ({} node(s) x {}), {}, {}\n", predict ? "predict" : "fit",
                                shape.world, r.product, shape.nodes, shape.devices, shape.strategy, shape.precision);
  out += fmt::format("  parameters            {}\n", r.parameters);
  if (predict)
    out += fmt::format("  batch                 {} prompts of {} tokens, {} new tokens each, per {}\n",
                       shape.micro_batch, shape.tokens_per_sample, shape.max_new_tokens,
                       shape.replicas == shape.world ? "rank" : "data-parallel replica");
  else
    out += fmt::format("  batch                 micro {} x accumulation {} x {} {}{}\n", shape.micro_batch,
                       shape.accumulate, shape.replicas == shape.world ? "world" : "data-parallel replicas",
                       shape.replicas,
                       r.per_token ? fmt::format(" x {} tokens", shape.tokens_per_sample) : std::string());
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
    out += fmt::format("    pipeline bubble     {} ({} stages, {} micro-batches in 1F1B{})\n",
                       share(st.breakdown.pipeline_bubble), shape.stages, shape.accumulate,
                       shape.virtual_stages > 1
                           ? fmt::format(", interleaved over {} virtual stages a rank; stage transfers {:.4f} s",
                                         shape.virtual_stages, st.pipeline_transfers)
                           : "");
  out += fmt::format("  communication         {:.4f} s in {} collectives (overlapped or not)\n", st.comm_seconds,
                     st.collectives);
  out += fmt::format("  throughput            {:.0f} {}/s{}\n", r.throughput, r.per_token ? "tokens" : "samples",
                     predict && r.per_token ? " (generated)" : "");
  if (r.range)
    out += fmt::format("    likely range        {:.0f} .. {:.0f} tokens/s (this estimate over the leave-one-out ratios "
                       "{:.2f} .. {:.2f} of the {} published {} {} runs most like it{}, widened x{:.2f} for its "
                       "distance from the nearest: {})\n",
                       r.range->low, r.range->high, r.range->rows_low, r.range->rows_high, r.range->rows,
                       r.range->from, r.range->training ? "training" : "inference",
                       r.range->from != r.generation ? fmt::format(" ({} has none)", r.generation) : "",
                       r.range->widening, r.range->nearest);
  out += fmt::format("  MFU                   {:.1f}% of the {} peak\n", 100 * r.mfu,
                     device::dtypeName(shape.matrix_dtype));
  out += fmt::format("  device memory limit   {} ({})\n", gib(r.limit.bytes), r.limit.source);
  for (std::size_t i = 0; i < r.ranks.size(); ++i) {
    const RankMemory& m = r.ranks[i];
    if (i > 0 && r.ranks[i - 1].last_rank + 1 < m.rank)
      out += fmt::format("  ranks {}-{}          between the ranks above and below (not traced)\n",
                         r.ranks[i - 1].last_rank + 1, m.rank - 1);
    std::string who =
        m.last_rank > m.rank ? fmt::format("ranks {}-{}", m.rank, m.last_rank) : fmt::format("rank {}", m.rank);
    if (shape.stages > 1) who += fmt::format(" stage {}", m.stage);
    out += fmt::format("  {:<21} peak {} at {}\n", who, gib(m.peak), m.peak_at);
    out += fmt::format(
        "                        persistent {} (weights {}, optimizer state {}, gradients {}), "
        "activations {}\n",
        gib(m.persistent), gib(m.weights), gib(m.optimizer_state), gib(m.gradients), gib(m.activations));
  }
  out += fmt::format("  fits                  {}\n", r.fits ? "yes" : "NO");
  for (const FitChange& c : r.suggestions) out += "    try " + describe(c) + "\n";
  out += fmt::format("  most expensive ops ({}, one step):\n", stepRankName(r));
  for (std::size_t i = 0; i < std::min<std::size_t>(10, r.ops.size()); ++i) {
    const OpTotal& o = r.ops[i];
    out += fmt::format("    {:>9.3f} ms  {:>5}x  {} {}\n", 1e3 * o.seconds, o.calls, o.op, o.operands);
  }
  if (verbose) {
    out += "  assumptions:\n";
    for (const device::Assumption& a : r.assumptions)
      out += fmt::format("    {:<24} {:>10.4g} {:<24} {}\n", a.name, a.value, a.unit, a.source);
    out += fmt::format("  the step's time by the parameter that bounds it ({}):\n", stepRankName(r));
    for (const StepShare& s : r.step_shares)
      out += fmt::format("    {:<24} {:>9.4f} s {:5.1f}%\n", s.parameter, s.seconds,
                         r.step_rank_seconds > 0 ? 100 * s.seconds / r.step_rank_seconds : 0);
  }
  return out;
}

}  // namespace hpu::core::estimate
