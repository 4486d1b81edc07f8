// `hpu-train estimate plan`'s result: the layouts a search over tensor,
// pipeline and data parallelism, ZeRO stage, sequence parallelism,
// micro-batch and recompute priced for one model, cluster and global batch,
// ranked, and the text and JSON reports of them. The search itself (tracing
// reduced jobs) is the app's (core/app/src/plan_search.h); this is its value
// and its rendering.
// Thread-safety: pure values and functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "hpu/core/estimate/estimate_result.h"
#include "hpu/core/estimate/pricing.h"

namespace hpu::core::estimate {

// One way to run the job: what `estimate plan` chooses.
struct Layout {
  enum class Strategy { kModelParallel, kDeepSpeed };
  Strategy strategy = Strategy::kModelParallel;
  int tensor_parallel = 1, pipeline_stages = 1, data_parallel = 1, expert_parallel = 1;
  int virtual_stages = 1;  // model chunks a pipeline stage holds (interleaved 1F1B)
  int zero_stage = 0;    // ModelParallelStrategy: 0 or 1; DeepSpeed: 1 to 3
  bool offload = false;  // DeepSpeed: optimizer state (and stage 3's parameters) in host memory
  bool sequence_parallel = false;
  std::int64_t micro_batch = 1, accumulate = 1;
  std::string recompute = "false";  // gradient_checkpointing: false, selective or true
  bool operator==(const Layout&) const = default;
};

// "TP8 PP4 VP2 DP2 ZeRO-1 SP, micro 1 x 512, recompute selective".
std::string describe(const Layout& layout);

// The dotted config keys and YAML values that set `layout` on a config
// (as on the command line: trainer.strategy.init_args.tensor_parallel_size=8).
std::vector<std::pair<std::string, std::string>> configOverrides(const Layout& layout);

// One layout, priced.
struct PlannedLayout {
  Layout layout;
  bool fits = false;
  std::uint64_t peak = 0;  // the largest rank's device memory
  JobFigures figures;      // step, tokens/s, likely range, MFU
  // Priced from a trace of the whole job, as `estimate fit` prices it (else
  // extrapolated from reduced traces: one and two layers a stage, the first
  // micro-batches).
  bool whole = false;
  std::string loses;  // after the first: what costs it most against the best ("+0.41 s pipeline bubble")
};

// Megatron-LM's interleaved 1F1B (virtual pipeline stages) for a layout
// with pipeline stages, priced from its step without them (interleavedStep):
// each rank holds `virtual_stages` chunks of its layers, so the pipeline
// fills and drains in 1/v of the time while a micro-batch crosses v times
// as many stage boundaries. The search prices the fastest of them whole,
// as `estimate fit` prices a config that sets virtual_pipeline_size.
struct Interleaving {
  int virtual_stages = 1;
  double bubble = 0, transfers = 0;  // seconds a step
  double throughput = 0;             // tokens/s
};
// For v = 2.. dividing `layers_per_stage` (at most 8), when the
// micro-batches are a multiple of the stages (Megatron-LM's condition).
std::vector<Interleaving> interleavings(const PlannedLayout& planned, std::int64_t layers_per_stage);
// The layout a plan's interleavings are of: the first of `ranked` (fastest
// first) without virtual stages; null when there is none.
const PlannedLayout* fastestWithoutVirtualStages(const std::vector<PlannedLayout>& ranked);

struct PlanResult {
  std::string model;    // "LlamaForCausalLM, 80 layers, 68,976,648,192 parameters"
  std::string product;  // "Intel Gaudi 2"
  std::string generation;
  int world = 1, nodes = 1, devices = 1;
  std::string precision;
  std::int64_t tokens_per_sample = 0, global_batch = 0;
  device::MemoryLimit limit;
  std::vector<PlannedLayout> fitting;   // fastest first
  std::vector<PlannedLayout> too_big;   // the nearest misses, smallest peak first
  std::int64_t candidates = 0;          // layouts that divide the job
  std::int64_t priced = 0, over_memory = 0;
  std::int64_t traces = 0;              // reduced and whole jobs traced
  double seconds = 0;                   // the search's wall time
  std::optional<Layout> given;          // the config's own layout, if the search holds it
  int given_rank = 0;                   // its place among `fitting` (1-based; 0: does not fit or not searched)
  // fastestWithoutVirtualStages(fitting)'s interleavings (empty when it is
  // null or has no pipeline stages).
  std::vector<Interleaving> interleaved;
};

// "46.8 GiB", "8.0 MiB": device memory as the plan reports print it.
std::string bytesText(std::uint64_t bytes);

// The reason `b` is slower than `a`: the part of the step that grew most.
std::string whyLoses(const PlannedLayout& a, const PlannedLayout& b);

// `top`: rows of the table.
std::string textPlanReport(const PlanResult& result, std::size_t top);
nlohmann::json jsonPlanReport(const PlanResult& result);

}  // namespace hpu::core::estimate
