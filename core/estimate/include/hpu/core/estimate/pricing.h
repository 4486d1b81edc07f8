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
// stages plus 1F1B's bubble (pipelineBubble) and the matrix work of a stage
// on average.
std::size_t stepRank(std::span<const StepTime> steps, const JobShape& shape);
StepTime jobStep(std::span<const StepTime> steps, std::span<const int> stages_each, const JobShape& shape);

// 1F1B's bubble: while the pipeline fills and drains, each of the stages - 1
// other stages idles one micro-batch's forward and backward of the slowest
// stage, whose step of `micro_batches` takes `stage_seconds` (Narayanan et
// al., "Efficient Large-Scale Language Model Training on GPU Clusters",
// 2021: (p - 1) / m of the ideal time). Interleaved over `virtual_stages`
// model chunks a stage, a fill or drain step is a chunk's: the bubble is
// divided by v, (p - 1) / (v m).
double pipelineBubble(double stage_seconds, int stages, int virtual_stages, std::int64_t micro_batches);
// `step`, priced without virtual stages, as it would be interleaved over
// `virtual_stages` chunks: its bubble divided by v (pipelineBubble), and
// the stage transfers compute waits for (StepTime::pipeline_transfers)
// times v, as a micro-batch crosses v times as many stage boundaries.
// (Tracing an interleaved run records its transfers themselves.)
StepTime interleavedStep(const StepTime& step, int virtual_stages);

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
