// Watches one traced rank's ops and collectives (an OpObserver on the
// training thread, the strategy's CollectiveObserver), prices each on a
// GaudiModel as it happens, and at the end of a step lays them on two
// streams, compute and communication, as the real stack overlaps them:
//  - gradient reductions (all-reduce, reduce-scatter) issued during backward
//    run beside it (DDP's buckets, DeepSpeed's overlap_comm) and are waited
//    for before the optimizer step;
//  - parameter all-gathers before the optimizer step are ZeRO-3's: each may
//    start once the previous one was issued (prefetch), and compute waits
//    only for the one it needs;
//  - anything else blocks compute.
// It also notes the op at which the device's memory peaked.
// Thread-safety: one traced rank on one thread (a simulated process group
// calls the collective observer on the caller's thread).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "hpu/comm/collective_observer.h"
#include "hpu/core/estimate/op_costs.h"
#include "hpu/core/tensor/op_record.h"
#include "hpu/device/device.h"
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

class StepRecorder final : public ops::OpObserver, public comm::CollectiveObserver {
 public:
  StepRecorder(const device::GaudiModel& model, device::Device& device);

  void onOp(const ops::OpEvent& event) override;
  void onCollective(const comm::CollectiveRecord& record) override;

  // Closes the step begun at the last endStep (or construction): its time,
  // with the host's part for `graphs` launched graphs.
  StepTime endStep(std::int64_t graphs);
  // The ops of the last closed step, most expensive first.
  const std::vector<OpTotal>& lastStepOps() const { return last_ops_; }
  // The op (or collective) during which the device's memory peaked:
  // "linear_backward bfloat16[...]".
  const std::string& peakAt() const { return peak_at_; }

 private:
  enum class Stream { kCompute, kOverlapped, kPrefetch, kBlocking };
  struct Event {
    Stream stream;
    Engine engine;
    double seconds;
    int peers = 0;  // a collective's (GaudiModel::collectivePeers)
  };
  void notePeak(const std::string& where);
  void addOp(std::string name, const std::string& operands, const OpCost& cost);

  const device::GaudiModel& model_;
  device::Device& device_;
  std::vector<Event> events_;
  struct Forward {
    OpCost backward;  // the price of its backward function
    std::string operands;
  };
  std::unordered_map<std::uint64_t, Forward> forward_;  // this step's forward ops by id
  std::map<std::pair<std::string, std::string>, OpTotal> ops_;
  std::vector<OpTotal> last_ops_;
  bool backward_seen_ = false, optimizer_seen_ = false;
  std::uint64_t peak_bytes_ = 0;
  std::string peak_at_ = "setup";
};

}  // namespace hpu::core::estimate
