// Everything an estimate reports, priced (pricing.h) from a traced job: the
// job, its device memory per class of ranks, its step time and what it was
// spent on, throughput, MFU, the likely range, the model's assumptions, and
// what would make a run that does not fit fit. The text and the JSON report
// (report.h) both render this one value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hpu/core/estimate/step_time.h"
#include "hpu/core/estimate/traced_job.h"
#include "hpu/device/allocator.h"
#include "hpu/device/gaudi_model.h"

namespace hpu::core::estimate {

// One traced rank's device memory, for the ranks [rank, last_rank].
struct RankMemory {
  int rank = 0, last_rank = 0;
  int stage = 0;
  std::uint64_t peak = 0;
  std::string peak_at;
  std::uint64_t persistent = 0, weights = 0, optimizer_state = 0, gradients = 0;
  std::uint64_t activations = 0;  // peak - persistent
};

// How far off the throughput may be: the estimate over the leave-one-out
// ratios of the published runs most like this one, widened with its
// distance from the nearest (device::uncertaintyFor).
struct ThroughputRange {
  double low = 0, high = 0;              // tokens/s
  double ratio_low = 1, ratio_high = 1;  // the widened ratios it divides by (high, low)
  double rows_low = 1, rows_high = 1;    // the runs' own ratios
  double widening = 1;                   // the factor each side is widened by
  int rows = 0;                          // published runs compared
  bool training = true;                  // the mode of those runs (else inference)
  std::string from;                      // the generation whose runs they are: "gaudi2"
  std::string nearest;                   // the nearest run: "64 cards, 4096 tokens in, global batch 1024"
};

// Part of the step rank's step time, by the calibration parameter that bounds it.
struct StepShare {
  std::string parameter;  // "mme_efficiency", "host_per_graph", "host link and memory (specs)"
  double seconds = 0;
};

// A change to the config that may make a run fit, and rank 0's peak under it.
struct FitChange {
  std::string what;  // "trainer.strategy: hpu_deepspeed_stage_3"
  std::uint64_t peak = 0;
  bool fits = false;
};

struct EstimateResult {
  JobShape shape;
  std::string generation;  // DeviceSpec::name: "gaudi2"
  std::string product;     // DeviceSpec::product: "Intel Gaudi 2"
  std::int64_t parameters = 0;  // the whole model's (every stage's)
  std::int64_t padding = 0;     // elements of a padded vocabulary's rows beyond `parameters`

  // The job's step: the step rank's (with pipeline stages, plus 1F1B's bubble).
  StepTime step;
  bool per_token = false;  // throughput counts tokens (a language model), else samples
  double throughput = 0;   // per second (predict: generated tokens)
  std::optional<ThroughputRange> range;
  double mfu = 0;  // the step's matrix FLOPs over the matrix engine's peak for the matrix dtype

  device::MemoryLimit limit;
  std::uint64_t peak = 0;  // the largest of every rank's
  bool fits = false;       // peak <= limit
  std::vector<RankMemory> ranks;  // by rank, as TracedJob::ranks
  // Filled by whoever can trace again (the app's fit suggestions); empty when it fits.
  std::vector<FitChange> suggestions;

  // The rank whose step sets the job's: rank 0, or with pipeline stages the slowest stage's.
  int step_rank = 0, step_stage = 0;
  double step_rank_seconds = 0;  // its own step, without the bubble
  std::vector<OpTotal> ops;      // its ops, most expensive first
  std::vector<StepShare> step_shares;  // its step by bounding parameter, largest first

  device::Calibration calibration;
  std::vector<device::Assumption> assumptions;  // the Gaudi model's and the op pricing's
};

}  // namespace hpu::core::estimate
