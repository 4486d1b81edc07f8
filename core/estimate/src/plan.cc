#include "hpu/core/estimate/plan.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <array>

#include "hpu/device/check.h"

namespace hpu::core::estimate {
namespace {

// Seconds in the unit that gives them three digits or so.
std::string secondsText(double s) {
  if (s >= 1) return fmt::format("{:.2f} s", s);
  if (s >= 1e-3) return fmt::format("{:.1f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

}  // namespace

std::string bytesText(std::uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= (1ull << 30)) return fmt::format("{:.1f} GiB", b / (1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.1f} MiB", b / (1ull << 20));
  return fmt::format("{:.1f} KiB", b / (1ull << 10));
}

namespace {

std::string recomputeName(const std::string& value) {
  if (value == "true") return "full";
  if (value == "false") return "none";
  return value;
}

std::string rangeText(const PlannedLayout& p) {
  return p.figures.range ? fmt::format("{:.0f}-{:.0f}", p.figures.range->low, p.figures.range->high) : std::string("-");
}

nlohmann::json layoutJson(const Layout& l) {
  nlohmann::json overrides = nlohmann::json::object();
  for (const auto& [key, value] : configOverrides(l)) overrides[key] = value;
  return {{"layout", describe(l)},
          {"strategy", l.strategy == Layout::Strategy::kDeepSpeed ? "HPUDeepSpeedStrategy" : "ModelParallelStrategy"},
          {"tensor_parallel", l.tensor_parallel},
          {"pipeline_stages", l.pipeline_stages},
          {"virtual_stages", l.virtual_stages},
          {"data_parallel", l.data_parallel},
          {"expert_parallel", l.expert_parallel},
          {"zero_stage", l.zero_stage},
          {"offload", l.offload},
          {"sequence_parallel", l.sequence_parallel},
          {"micro_batch", l.micro_batch},
          {"accumulate_grad_batches", l.accumulate},
          {"gradient_checkpointing", l.recompute},
          {"config_overrides", overrides}};
}

nlohmann::json plannedJson(const PlannedLayout& p) {
  nlohmann::json j = layoutJson(p.layout);
  j["fits"] = p.fits;
  j["peak_device_memory_bytes"] = p.peak;
  j["priced_whole"] = p.whole;
  if (p.fits || p.figures.throughput > 0) {
    j["tokens_per_s"] = p.figures.throughput;
    if (p.figures.range) j["tokens_per_s_range"] = {p.figures.range->low, p.figures.range->high};
    j["mfu"] = p.figures.mfu;
    j["step_time_s"] = p.figures.step.seconds;
    const StepBreakdown& b = p.figures.step.breakdown;
    j["breakdown"] = {{"matrix_s", b.matrix},       {"vector_s", b.vector}, {"exposed_comm_s", b.exposed_comm},
                      {"optimizer_s", b.optimizer}, {"offload_s", b.offload}, {"host_s", b.host},
                      {"pipeline_bubble_s", b.pipeline_bubble}};
    j["pipeline_transfers_s"] = p.figures.step.pipeline_transfers;
  }
  if (!p.loses.empty()) j["loses"] = p.loses;
  return j;
}

}  // namespace

std::string describe(const Layout& l) {
  std::string out = fmt::format("TP{} PP{}{} DP{}", l.tensor_parallel, l.pipeline_stages,
                                l.virtual_stages > 1 ? fmt::format(" VP{}", l.virtual_stages) : "", l.data_parallel);
  if (l.expert_parallel > 1) out += fmt::format(" EP{}", l.expert_parallel);
  out += fmt::format(" ZeRO-{}", l.zero_stage);
  if (l.offload) out += "+offload";
  if (l.sequence_parallel) out += " SP";
  return out + fmt::format(", micro {} x {}, recompute {}", l.micro_batch, l.accumulate, recomputeName(l.recompute));
}

std::vector<std::pair<std::string, std::string>> configOverrides(const Layout& l) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  if (l.strategy == Layout::Strategy::kDeepSpeed) {
    out = {{"trainer.strategy", "HPUDeepSpeedStrategy"},
           {"trainer.strategy.init_args.stage", std::to_string(l.zero_stage)},
           {"trainer.strategy.init_args.offload_optimizer", b(l.offload)},
           {"trainer.strategy.init_args.offload_parameters", b(l.offload && l.zero_stage == 3)}};
    if (l.expert_parallel > 1)
      out.emplace_back("trainer.strategy.init_args.expert_parallel_size", std::to_string(l.expert_parallel));
  } else {
    out = {{"trainer.strategy", "ModelParallelStrategy"},
           {"trainer.strategy.init_args.tensor_parallel_size", std::to_string(l.tensor_parallel)},
           {"trainer.strategy.init_args.pipeline_parallel_size", std::to_string(l.pipeline_stages)},
           {"trainer.strategy.init_args.virtual_pipeline_size", std::to_string(l.virtual_stages)},
           {"trainer.strategy.init_args.data_parallel_size", std::to_string(l.data_parallel)},
           {"trainer.strategy.init_args.sequence_parallel", b(l.sequence_parallel)},
           {"trainer.strategy.init_args.zero_stage", std::to_string(l.zero_stage)},
           // The layers split as the model balances them, chunks counted by virtual_pipeline_size.
           {"trainer.strategy.init_args.pipeline_layers", "null"},
           {"trainer.strategy.init_args.layers_per_virtual_stage", "null"}};
    if (l.expert_parallel > 1)
      out.emplace_back("trainer.strategy.init_args.expert_parallel_size", std::to_string(l.expert_parallel));
  }
  out.emplace_back("trainer.accumulate_grad_batches", std::to_string(l.accumulate));
  out.emplace_back("data.init_args.batch_size", std::to_string(l.micro_batch));
  out.emplace_back("model.init_args.gradient_checkpointing", l.recompute);
  return out;
}

std::vector<Interleaving> interleavings(const PlannedLayout& p, std::int64_t layers_per_stage) {
  std::vector<Interleaving> out;
  const Layout& l = p.layout;
  const StepTime& step = p.figures.step;
  if (l.pipeline_stages < 2 || l.virtual_stages != 1 || l.accumulate % l.pipeline_stages != 0 || step.seconds <= 0)
    return out;
  const double tokens = p.figures.throughput * step.seconds;
  for (int v = 2; v <= 8 && v <= layers_per_stage; ++v) {
    if (layers_per_stage % v != 0) continue;
    const StepTime interleaved = interleavedStep(step, v);
    out.push_back({v, interleaved.breakdown.pipeline_bubble, interleaved.pipeline_transfers, tokens / interleaved.seconds});
  }
  return out;
}

const PlannedLayout* fastestWithoutVirtualStages(const std::vector<PlannedLayout>& ranked) {
  const auto plain = std::find_if(ranked.begin(), ranked.end(),
                                  [](const PlannedLayout& p) { return p.layout.virtual_stages == 1; });
  return plain != ranked.end() ? &*plain : nullptr;
}

std::string whyLoses(const PlannedLayout& a, const PlannedLayout& b) {
  const StepBreakdown& x = a.figures.step.breakdown;
  const StepBreakdown& y = b.figures.step.breakdown;
  // Step times are per global batch, so parts compare directly.
  const std::array<std::pair<const char*, double>, 7> parts{{
      {"matrix engine (recompute, smaller products)", y.matrix - x.matrix},
      {"vector engine", y.vector - x.vector},
      {"exposed communication", y.exposed_comm - x.exposed_comm},
      {"pipeline bubble", y.pipeline_bubble - x.pipeline_bubble},
      {"optimizer", y.optimizer - x.optimizer},
      {"offload", y.offload - x.offload},
      {"host per graph", y.host - x.host},
  }};
  const auto worst = std::max_element(parts.begin(), parts.end(),
                                      [](const auto& p, const auto& q) { return p.second < q.second; });
  return fmt::format("+{} {}", secondsText(worst->second), worst->first);
}

std::string textPlanReport(const PlanResult& r, std::size_t top) {
  std::string out = fmt::format("Plan: {} on {} x {} ({} node(s) x {}), {}, {} tokens a sample, global batch {}\n",
                                r.model, r.world, r.product, r.nodes, r.devices, r.precision, r.tokens_per_sample,
                                r.global_batch);
  out += fmt::format(
      "  searched {} layouts that divide the job in {:.1f} s ({} reduced or whole traces): {} fit, {} exceed {} a "
      "card\n",
      r.candidates, r.seconds, r.traces, r.fitting.size(), r.over_memory, bytesText(r.limit.bytes));
  if (!r.fitting.empty()) {
    out += fmt::format("  {:>4}  {:<56} {:>9}  {:>15}  {:>5}  {:>9}  {}\n", "rank", "layout", "tokens/s",
                       "likely range", "MFU", "peak/card", "why it loses to #1");
    for (std::size_t i = 0; i < r.fitting.size() && i < top; ++i) {
      const PlannedLayout& p = r.fitting[i];
      out += fmt::format("  {:>4}  {:<56} {:>9.0f}{} {:>15}  {:>4.1f}%  {:>9}  {}\n", i + 1, describe(p.layout),
                         p.figures.throughput, p.whole ? " " : "~", rangeText(p), 100 * p.figures.mfu, bytesText(p.peak),
                         i == 0 ? std::string("-") : p.loses);
    }
    out += "  (~: extrapolated from traces of one and two layers a stage; the others priced whole, as estimate fit "
           "prices them)\n";
  }
  if (!r.interleaved.empty()) {
    // Holds by PlanResult's contract: `interleaved` is non-empty only as this
    // layout's interleavings (searchPlans takes it from this function).
    const PlannedLayout* plain = fastestWithoutVirtualStages(r.fitting);
    HPU_CHECK(plain != nullptr, "a plan's interleavings without a fitting layout free of virtual stages");
    const StepTime& step = plain->figures.step;
    out += fmt::format("  {} with interleaved 1F1B (virtual pipeline stages), bubble {} and stage transfers {} "
                       "without:\n",
                       describe(plain->layout), secondsText(step.breakdown.pipeline_bubble),
                       secondsText(step.pipeline_transfers));
    for (const Interleaving& i : r.interleaved)
      out += fmt::format("        {} virtual stages a rank: {:.0f} tokens/s (bubble {}, transfers {})\n", i.virtual_stages,
                         i.throughput, secondsText(i.bubble), secondsText(i.transfers));
  }
  if (!r.too_big.empty()) {
    out += "  nearest layouts that do not fit:\n";
    for (const PlannedLayout& p : r.too_big) out += fmt::format("        {:<56} peak {}\n", describe(p.layout), bytesText(p.peak));
  }
  if (r.given) {
    if (r.given_rank > 0)
      out += fmt::format("  the config's own layout ({}) ranks {} of {}\n", describe(*r.given), r.given_rank,
                         r.fitting.size());
    else
      out += fmt::format("  the config's own layout ({}) does not fit\n", describe(*r.given));
  }
  return out;
}

nlohmann::json jsonPlanReport(const PlanResult& r) {
  nlohmann::json fitting = nlohmann::json::array(), too_big = nlohmann::json::array();
  for (const PlannedLayout& p : r.fitting) fitting.push_back(plannedJson(p));
  for (const PlannedLayout& p : r.too_big) too_big.push_back(plannedJson(p));
  nlohmann::json j{{"model", r.model},
                   {"generation", r.generation},
                   {"world", r.world},
                   {"nodes", r.nodes},
                   {"devices", r.devices},
                   {"precision", r.precision},
                   {"tokens_per_sample", r.tokens_per_sample},
                   {"global_batch", r.global_batch},
                   {"device_memory_limit_bytes", r.limit.bytes},
                   {"candidates", r.candidates},
                   {"over_memory", r.over_memory},
                   {"traces", r.traces},
                   {"search_seconds", r.seconds},
                   {"plans", fitting},
                   {"not_fitting", too_big}};
  nlohmann::json interleaved = nlohmann::json::array();
  for (const Interleaving& i : r.interleaved)
    interleaved.push_back({{"virtual_stages", i.virtual_stages},
                           {"tokens_per_s", i.throughput},
                           {"pipeline_bubble_s", i.bubble},
                           {"pipeline_transfers_s", i.transfers}});
  j["first_interleaved"] = interleaved;
  if (r.given) {
    j["given"] = layoutJson(*r.given);
    j["given_rank"] = r.given_rank;
  }
  return j;
}

}  // namespace hpu::core::estimate
