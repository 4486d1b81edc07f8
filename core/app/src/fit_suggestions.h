// What would make a run that does not fit fit, for `hpu-train estimate`:
// each change to the config traced again (a trace takes a fraction of a
// second) and rank 0's peak under it: the next ZeRO stage, offload,
// activation checkpointing, and the largest micro-batch (prompt batch for
// predict) that fits, with the accumulation that keeps the global batch.
// Thread-safety: as job_trace.h.
#pragma once

#include <cstdint>
#include <vector>

#include "hpu/core/app/run.h"
#include "hpu/core/estimate/estimate_result.h"
#include "hpu/core/estimate/traced_job.h"
#include "hpu/device/emulator.h"

namespace hpu::core::app {

// `run`, `steps` and `settings` as traceJob traced `shape`; `limit`: device
// memory in bytes. A change whose trace fails is left out (logged at debug).
std::vector<estimate::FitChange> fitSuggestions(const RunRequest& run, std::int64_t steps,
                                                const device::EmulatorSettings& settings,
                                                const estimate::JobShape& shape, std::uint64_t limit);

}  // namespace hpu::core::app
