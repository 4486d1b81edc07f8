// What tracing a job measures, before anything is priced: the job's shape,
// and one traced rank for each class of ranks with identical shards (or, with
// pipeline parallelism, for each stage): its device memory as the emulator's
// allocator counted it, and its last step as recorded (step_recorder.h).
// The app's tracing (job_trace.h) fills it; pricing.h prices it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hpu/core/estimate/step_recorder.h"
#include "hpu/device/gaudi_model.h"

namespace hpu::core::estimate {

// What the traced job looks like, from rank 0's trace.
struct JobShape {
  bool predict = false;  // `estimate predict` (else fit)
  int devices = 1, nodes = 1, world = 1;
  int replicas = 1;  // data-parallel: ranks that read different batches (tensor-parallel ranks and stages share theirs)
  int stages = 1, tensor_parallel = 1;
  int virtual_stages = 1;  // model chunks a stage holds (interleaved 1F1B)
  std::int64_t accumulate = 1, micro_batch = 1, tokens_per_sample = 0, max_new_tokens = 0;
  std::string strategy, precision;
  device::DType matrix_dtype = device::DType::kFloat32;
  device::JobTopology topology() const { return {devices, nodes}; }
};

// One traced rank and the ranks [rank, last_rank] it stands for.
struct RankTrace {
  int rank = 0, last_rank = 0;
  int stage = 0;  // its pipeline stage (with pipeline parallelism: and each replica's ranks of it)
  std::uint64_t weights = 0, optimizer_state = 0, gradients = 0;  // persistent, by kind
  std::uint64_t persistent = 0, peak = 0;
  std::string peak_at;  // the op during which memory peaked (StepRecorder::peakAt)
  RecordedStep step;    // the last traced step
  std::int64_t parameters = 0;  // the model's; with pipeline stages, its stage's
};

struct TracedJob {
  JobShape shape;
  std::vector<RankTrace> ranks;  // by rank, rank 0 first
};

}  // namespace hpu::core::estimate
