// Prices a traced job on a Gaudi model: each traced rank's recorded step,
// the job's step (the slowest stage's with pipeline parallelism, plus 1F1B's
// bubble), throughput, MFU and the likely range, and device memory against
// the limit. Prints nothing and traces nothing: a planner may call it for
// many traced jobs.
// Thread-safety: a pure function.
#pragma once

#include <span>
#include <vector>

#include "hpu/core/estimate/estimate_result.h"
#include "hpu/core/estimate/traced_job.h"
#include "hpu/device/allocator.h"
#include "hpu/device/gaudi_model.h"

namespace hpu::core::estimate {

// The job's step from its traced ranks' own steps (priceStep), by rank as
// TracedJob::ranks, `stages_each[i]` the pipeline stages rank i stands for
// (1 each without stages): the step rank's step (stepRank), with pipeline
// stages plus 1F1B's bubble and the matrix work of a stage on average.
std::size_t stepRank(std::span<const StepTime> steps, const JobShape& shape);
StepTime jobStep(std::span<const StepTime> steps, std::span<const int> stages_each, const JobShape& shape);

// What a job of `shape` whose traced ranks stepped `steps` does per second.
struct JobFigures {
  StepTime step;
  bool per_token = false;  // as EstimateResult's
  double throughput = 0;
  std::optional<ThroughputRange> range;
  double mfu = 0;
};
JobFigures jobFigures(const JobShape& shape, const device::GaudiModel& model, std::span<const StepTime> steps,
                      std::span<const int> stages_each);

// The pipeline stages each traced rank of `job` stands for.
std::vector<int> stagesEach(const TracedJob& job);

// REQUIRES: job.ranks is not empty; model.topology() is job.shape.topology().
EstimateResult priceJob(const TracedJob& job, const device::GaudiModel& model, const device::MemoryLimit& limit);

}  // namespace hpu::core::estimate
