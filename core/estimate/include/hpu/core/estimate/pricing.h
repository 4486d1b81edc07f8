// Prices a traced job on a Gaudi model: each traced rank's recorded step,
// the job's step (the slowest stage's with pipeline parallelism, plus 1F1B's
// bubble), throughput, MFU and the likely range, and device memory against
// the limit. Prints nothing and traces nothing: a planner may call it for
// many traced jobs.
// Thread-safety: a pure function.
#pragma once

#include "hpu/core/estimate/estimate_result.h"
#include "hpu/core/estimate/traced_job.h"
#include "hpu/device/allocator.h"
#include "hpu/device/gaudi_model.h"

namespace hpu::core::estimate {

// REQUIRES: job.ranks is not empty; model.topology() is job.shape.topology().
EstimateResult priceJob(const TracedJob& job, const device::GaudiModel& model, const device::MemoryLimit& limit);

}  // namespace hpu::core::estimate
