// A recorded step (step_recorder.h) priced on a GaudiModel: each op at its
// op_costs.h price, and the step laid on two streams, compute and
// communication, as the recorder placed each collective. Collectives of one
// rank move nothing and wait for nobody.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hpu/core/estimate/step_recorder.h"
#include "hpu/device/gaudi_model.h"

namespace hpu::core::estimate {

// Seconds of one step by what they were spent on.
struct StepBreakdown {
  double matrix = 0;        // matrix-engine ops
  double vector = 0;        // vector-engine ops
  double exposed_comm = 0;  // communication compute waited for
  double optimizer = 0;     // the optimizer step on the device
  double offload = 0;       // host link copies and host optimizer steps
  double host = 0;          // the host's part of each launched graph
  double pipeline_bubble = 0;  // pipeline stages waiting for each other (1F1B's fill and drain)
  double total() const { return matrix + vector + exposed_comm + optimizer + offload + host + pipeline_bubble; }
};

struct StepTime {
  StepBreakdown breakdown;
  double seconds = 0;       // breakdown.total()
  double matrix_flops = 0;  // done by the matrix engine
  double comm_seconds = 0;  // communication, overlapped or not
  std::int64_t ops = 0;     // priced ops and backward functions
  std::int64_t collectives = 0;
  std::int64_t graphs = 0;  // launched graphs (each costs the host's time per graph)
  std::int64_t blocking_collectives = 0;  // collectives compute waits for (each costs its overhead exposed)
  std::int64_t blocking_collective_peers = 0;  // their peers summed: each peer costs collective_overhead
  // Of exposed_comm: what compute waited for point-to-point transfers
  // between pipeline stages (two-rank broadcasts).
  double pipeline_transfers = 0;
};

// One kind of op (name, backward or not, operand shapes) and its time in a step.
struct OpTotal {
  std::string op;        // "linear", "linear_backward"
  std::string operands;  // "bfloat16[8,4096,4096] bfloat16[4096,4096]"
  std::int64_t calls = 0;
  double seconds = 0;
  double flops = 0;
  device::Work work{};  // of one call (every call of an op kind does the same)
};

struct PricedStep {
  StepTime time;
  std::vector<OpTotal> ops;  // most expensive first
};

PricedStep priceStep(const RecordedStep& step, const device::GaudiModel& model);

}  // namespace hpu::core::estimate
