// Tracing for `hpu-train estimate`: runs a config's step graph shape-only
// (no data read, no arithmetic) for the ranks of its job that differ, in
// this process, and measures each one's device memory and records its last
// step (estimate/traced_job.h). Prices nothing and prints nothing.
// Thread-safety: one trace at a time per thread; traces log through spdlog.
#pragma once

#include <cstdint>

#include "hpu/core/app/run.h"
#include "hpu/core/estimate/traced_job.h"
#include "hpu/device/emulator.h"

namespace hpu::core::app {

// The job `run` configures (run.subcommand: "fit" or "predict"), `steps`
// optimizer steps of fit traced (the last is kept). Every rank runs the same
// graph and differs only in its shards, so rank 0 and one rank of each other
// class of identical shards are traced (past 16 classes, the first and the
// last); with pipeline stages, one rank of each stage. `settings`: the
// emulator's as the job would run; tracing makes them shape-only and lifts
// the memory limit, so a run that does not fit is traced to its end.
// kBounding traces only the ranks that bound the job's step and peak, for a
// search that prices many layouts: rank 0 without stages (every rank runs its
// graph, rank 0 holds the largest shards); with stages the first, the second
// (standing for every middle stage: the same parts, and the most micro-batches
// in flight of them) and the last.
enum class TraceScope { kEveryClass, kBounding };
estimate::TracedJob traceJob(const RunRequest& run, std::int64_t steps, const device::EmulatorSettings& settings,
                             TraceScope scope = TraceScope::kEveryClass);

// The shape of the job `pipeline` (built from `run` for its rank 0) runs,
// as far as it is known before the Trainer exists (precision and matrix
// dtype are left at their defaults).
estimate::JobShape jobShapeOf(const RunRequest& run, const Pipeline& pipeline);

// `settings` as a trace runs them: shape-only, without a recipe cache,
// under a memory limit that never binds (a rehearsal's too).
device::EmulatorSettings traceSettings(const device::EmulatorSettings& settings);

// Rank 0's peak device memory (rank 0 holds the largest shards), traced with
// the log quiet below warnings.
std::uint64_t tracePeak(const RunRequest& run, std::int64_t steps, const device::EmulatorSettings& settings);

}  // namespace hpu::core::app
