#include "hpu/core/app/plan.h"

#include <spdlog/fmt/fmt.h>

#include <cstdio>

#include "hpu/core/app/root.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/base/file_io.h"
#include "hpu/core/config/compose.h"
#include "hpu/core/config/print.h"
#include "config_settings.h"
#include "plan_search.h"

namespace hpu::core {
namespace {

// Clusters searched for one that fits, beyond the config's: up to this many
// times its nodes.
constexpr int kMaxClusterFactor = 64;

// `run` on `nodes` x `devices`, in a layout every cluster has (the search
// chooses its own).
RunRequest onCluster(const RunRequest& run, int devices, int nodes) {
  return app::withSettings(run, {{"trainer.devices", std::to_string(devices)},
                                 {"trainer.num_nodes", std::to_string(nodes)},
                                 {"trainer.strategy", "ModelParallelStrategy"},
                                 {"trainer.strategy.init_args.data_parallel_size", "auto"},
                                 {"trainer.strategy.init_args.tensor_parallel_size", "auto"},
                                 {"trainer.strategy.init_args.pipeline_parallel_size", "1"}});
}

// Why nothing fits, and the smallest cluster (full servers of `devices_per_node`) on which something does.
std::string noFit(const RunRequest& run, const device::EmulatorSettings& settings, const estimate::PlanResult& r) {
  std::string out = fmt::format("estimate plan: no layout of {} fits {} x {} at a global batch of {}", r.model,
                                r.world, r.product, r.global_batch);
  if (!r.too_big.empty())
    out += fmt::format(": the smallest peak is {} a card ({}) against {}", estimate::bytesText(r.too_big.front().peak),
                       estimate::describe(r.too_big.front().layout), estimate::bytesText(r.limit.bytes));
  const int full = std::max(r.devices, 8);
  app::PlanSearchOptions memory_only;
  memory_only.memory_only = true;
  memory_only.global_batch = r.global_batch;
  for (int factor = 1; factor <= kMaxClusterFactor; factor *= 2) {
    const int nodes = r.nodes * factor;
    if (factor == 1 && full == r.devices) continue;
    try {
      const estimate::PlanResult bigger = app::searchPlans(onCluster(run, full, nodes), settings, memory_only);
      if (!bigger.fitting.empty())
        return out + fmt::format("; it fits on {} node(s) x {} ({}: peak {}): set trainer.num_nodes={}{}", nodes,
                                 full, estimate::describe(bigger.fitting.front().layout), estimate::bytesText(bigger.fitting.front().peak), nodes,
                                 full != r.devices ? fmt::format(" and trainer.devices={}", full) : "");
    } catch (const UsageError&) {
      // That cluster's layouts do not divide the batch; try the next.
    }
  }
  return out + fmt::format("; nor on {} node(s) x {}: lower data.init_args.block_size or the model's size", r.nodes *
                           kMaxClusterFactor, full);
}

}  // namespace

int runPlan(const PlanRequest& request) {
  const device::EmulatorSettings settings = device::loadEmulatorSettings(request.run.env);
  app::PlanSearchOptions options;
  options.whole = request.whole;
  const estimate::PlanResult result = app::searchPlans(request.run, settings, options);
  if (result.fitting.empty()) throw UsageError(noFit(request.run, settings, result));

  std::fputs(estimate::textPlanReport(result, request.top).c_str(), stdout);
  std::fflush(stdout);
  if (!request.json_path.empty())
    writeFileAtomically(request.json_path, estimate::jsonPlanReport(result).dump(2) + "\n");
  if (!request.output_path.empty()) {
    const RunRequest winner = app::withLayout(request.run, result.fitting.front().layout);
    const estimate::PlannedLayout& best = result.fitting.front();
    config::PrintOptions print;
    print.skip_default = true;
    writeFileAtomically(request.output_path,
                        fmt::format("# hpu-train estimate plan: {} on {} x {}: {:.0f} tokens/s, peak {} a card\n",
                                    estimate::describe(best.layout), result.world, result.product, best.figures.throughput,
                                    estimate::bytesText(best.peak)) +
                            config::printConfig(winner.config, config::rootType(), print));
    std::printf("  wrote %s: %s\n", request.output_path.c_str(), estimate::describe(result.fitting.front().layout).c_str());
  }
  return 0;
}

}  // namespace hpu::core
