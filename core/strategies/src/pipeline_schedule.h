// Pipeline parallelism's schedule and the links it moves tensors over.
//  - StageLinks: to the previous and next stage of this rank's pipeline:
//    for each neighbour and direction a two-rank process group split from
//    the job's (activations go forward in one, their gradients back in
//    another: the two sides issue each direction's transfers in the same
//    order, micro-batch after micro-batch, which the two directions
//    together are not in 1F1B). A transfer is its group's broadcast from the
//    sender, which queues and returns (a send never waits for its
//    receiver), so stages never wait on each other in a cycle. bfloat16
//    tensors travel as bfloat16, others as float32.
//  - runSchedule: one optimizer step's micro-batches in the 1F1B order
//    (PipeDream-flush, as DeepSpeed's and Megatron-LM's schedules): stage s
//    of P runs min(P - s - 1, M) forwards (warm-up), then alternates one
//    forward and one backward, then runs the backwards left (cool-down).
//    Stage 0 thus keeps up to P micro-batches' activations; the last stage
//    one. Without backward, the forwards only (evaluation).
#pragma once

#include <memory>
#include <vector>

#include "hpu/comm/process_group.h"
#include "hpu/core/strategies/pipeline_work.h"

namespace hpu::core {

class StageLinks {
 public:
  // A neighbour: the groups {previous stage, next stage} that carry
  // activations and gradients between it and this stage.
  struct Link {
    std::unique_ptr<comm::ProcessGroup> activations, gradients;
  };
  // Links to the previous and next stage (empty at the ends of the
  // pipeline); received tensors go to `device`.
  StageLinks(device::Device& device, Link previous, Link next)
      : device_(device), previous_(std::move(previous)), next_(std::move(next)) {}

  bool first() const { return previous_.activations == nullptr; }
  bool last() const { return next_.activations == nullptr; }
  // Activations to the next stage, and from the previous one (a new tensor
  // of `spec`'s shape and dtype).
  void sendForward(const Tensor& output) { send(*next_.activations, output); }
  Tensor recvForward(const PipelineModule::StageInput& spec) { return recv(*previous_.activations, device_, spec); }
  // Gradients to the previous stage, and from the next one (the gradient of
  // `output`).
  void sendBackward(const Tensor& grad) { send(*previous_.gradients, grad); }
  Tensor recvBackward(const Tensor& output) {
    return recv(*next_.gradients, output.device(), {output.shape(), output.dtype()});
  }
  void observe(const std::shared_ptr<comm::CollectiveObserver>& observer);

 private:
  static void send(comm::ProcessGroup& pair, const Tensor& t);
  static Tensor recv(comm::ProcessGroup& pair, device::Device& device, const PipelineModule::StageInput& spec);

  device::Device& device_;
  Link previous_, next_;
};

// Runs `micro_batches` through this stage as described above; returns the
// last stage's losses (on the last stage; zeros elsewhere and without values).
std::vector<double> runSchedule(PipelineWork& work, StageLinks& links, int stage, int stages,
                                std::size_t micro_batches, bool backward);

}  // namespace hpu::core
