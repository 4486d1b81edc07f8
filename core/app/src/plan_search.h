// The search behind `hpu-train estimate plan`: every layout of a config's
// model on its cluster at its global batch (tensor parallelism within a
// node, pipeline stages, data parallelism, ZeRO stage, sequence
// parallelism, micro-batch with the accumulation that keeps the global
// batch, recompute, expert parallelism for a mixture of experts), priced by
// the model `estimate fit` uses.
//
// A layout is not traced whole: its job is traced with one and with two
// decoder layers a stage, and with the fewest micro-batches that fill its
// pipeline and one more, only the ranks that bound it (TraceScope::kBounding),
// and each rank's priced step and peak memory are extrapolated to the layout's
// layers and micro-batches (a step is linear in both; the memory of a filled
// pipeline is linear in layers). The fastest layouts are then traced whole and
// priced as `estimate fit` prices them, so the winner's figure is its.
// Thread-safety: one search at a time per thread (traces log through spdlog).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hpu/core/app/run.h"
#include "hpu/core/estimate/plan.h"
#include "hpu/device/emulator.h"

namespace hpu::core::app {

struct PlanSearchOptions {
  std::size_t whole = 3;  // the fastest this many are traced whole
  // Only whether some layout fits: memory alone, up to the first that fits.
  bool memory_only = false;
  // Sequences a step (0: the config's micro-batch x accumulation x
  // data-parallel replicas).
  std::int64_t global_batch = 0;
};

// Throws UsageError when the config is not a causal LM's training run, or
// when its global batch divides across no layout (saying which would).
estimate::PlanResult searchPlans(const RunRequest& run, const device::EmulatorSettings& settings,
                                 const PlanSearchOptions& options = {});

// `run` with `layout`'s settings (estimate::configOverrides) applied.
RunRequest withLayout(const RunRequest& run, const estimate::Layout& layout);

}  // namespace hpu::core::app
