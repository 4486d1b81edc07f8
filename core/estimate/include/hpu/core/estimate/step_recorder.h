// Watches one traced rank's ops and collectives (an OpObserver on the
// training thread, the strategy's CollectiveObserver) and records each step
// as it ran: every op and backward function in issue order with its operand
// shapes, and every collective with its size, its group and the stream it
// runs on as the real stack overlaps them:
//  - gradient reductions (all-reduce, reduce-scatter) issued during backward
//    run beside it (DDP's buckets, DeepSpeed's overlap_comm) and are waited
//    for before the optimizer step;
//  - parameter all-gathers before the optimizer step are ZeRO-3's: each may
//    start once the previous one was issued (prefetch), and compute waits
//    only for the one it needs;
//  - anything else blocks compute.
// It also notes the op at which the device's memory peaked. Nothing is
// priced here: step_time.h prices a RecordedStep on a GaudiModel.
// Thread-safety: one traced rank on one thread (a simulated process group
// calls the collective observer on the caller's thread).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "hpu/comm/collective_observer.h"
#include "hpu/core/tensor/op_record.h"
#include "hpu/device/device.h"
#include "hpu/device/gaudi_model.h"

namespace hpu::core::estimate {

// One kind of forward op: its name and operands (every call of a kind costs
// the same, and so does its backward function).
struct OpKind {
  struct Operand {
    std::vector<std::int64_t> shape;
    device::DType dtype = device::DType::kFloat32;
    bool requires_grad = false;
  };
  std::string op;                 // "linear"
  std::vector<Operand> operands;
  std::string description;        // "bfloat16[8,4096,4096] bfloat16[4096,4096]"
};

// A collective as a rank issued it.
struct RecordedCollective {
  device::CollectiveKind kind = device::CollectiveKind::kBarrier;
  double bytes = 0;     // the whole buffer (a reduce-scatter's input, an allgather's output)
  int group_size = 0;   // its group's ranks and nodes (0, 0: the job's)
  int group_nodes = 0;
};

// One step of one rank: what ran, in order.
struct RecordedStep {
  enum class Stream { kCompute, kOverlapped, kPrefetch, kBlocking };
  struct Event {
    Stream stream = Stream::kCompute;
    bool backward = false;  // compute: the backward function of its kind's op
    std::uint32_t index = 0;  // compute: into op_kinds; else into collectives
  };
  std::vector<OpKind> op_kinds;  // distinct, in order of first call
  std::vector<RecordedCollective> collectives;
  std::vector<Event> events;
  std::int64_t graphs = 0;  // launched graphs (each costs the host's time per graph)
};

class StepRecorder final : public ops::OpObserver, public comm::CollectiveObserver {
 public:
  explicit StepRecorder(device::Device& device);

  void onOp(const ops::OpEvent& event) override;
  void onCollective(const comm::CollectiveRecord& record) override;

  // Closes the step begun at the last endStep (or construction), in which
  // `graphs` graphs were launched, and returns it.
  RecordedStep endStep(std::int64_t graphs);
  // The op (or collective) during which the device's memory peaked:
  // "linear_backward bfloat16[...]".
  const std::string& peakAt() const { return peak_at_; }

 private:
  void notePeak(const std::string& where);

  device::Device& device_;
  RecordedStep step_;
  std::unordered_map<std::string, std::uint32_t> kinds_;          // this step's op kinds by key
  std::unordered_map<std::uint64_t, std::uint32_t> forward_kind_;  // this step's forward ops' kinds by id
  bool backward_seen_ = false, optimizer_seen_ = false;
  std::uint64_t peak_bytes_ = 0;
  std::string peak_at_ = "setup";
};

}  // namespace hpu::core::estimate
