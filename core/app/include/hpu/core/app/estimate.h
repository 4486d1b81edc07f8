// `hpu-train estimate [fit|predict]`: runs a config's step graph with
// shape-only tensors (no data read, no arithmetic) for the ranks of the job
// that differ, in this process, and prices it on the emulated generation
// (device/gaudi_model.h): device memory per rank as the emulator's
// allocator counts it, and step time, throughput and MFU on Gaudi. Three
// parts: tracing (app/src/job_trace.h), pricing (estimate/pricing.h) and the
// text and JSON reports of one result (estimate/report.h).
#pragma once

#include <cstdint>
#include <string>

#include "hpu/core/app/run.h"

namespace hpu::core {

struct EstimateRequest {
  RunRequest run;          // run.subcommand: "fit" or "predict"
  std::int64_t steps = 2;  // fit: optimizer steps traced (the last is priced)
  std::string json_path;   // also write the report here ("": no)
  bool verbose = false;    // print the model's assumptions
};

// Prints the report. Returns 0 when the run fits, 1 when it does not.
int runEstimate(const EstimateRequest& request);

}  // namespace hpu::core
