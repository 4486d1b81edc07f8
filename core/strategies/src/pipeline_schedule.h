// Pipeline parallelism's schedule and the links it moves tensors over.
//  - StageLinks: to the previous and next stage of this rank's pipeline:
//    for each neighbour and direction a two-rank process group split from
//    the job's (activations go forward in one, their gradients back in
//    another). With virtual stages the pipeline is a ring: the last stage's
//    chunk passes its activations to the first stage's next chunk, and the
//    first stage is the last one's next. A transfer is its group's
//    broadcast from the sender, which queues and returns (a send never
//    waits for its receiver), so stages never wait on each other in a
//    cycle. bfloat16 tensors travel as bfloat16, others as float32.
//  - runSchedule: one optimizer step's micro-batches in the order
//    pipelineOrder gives (1F1B, interleaved over virtual stages), or without
//    backward the forwards only (evaluation). Messages between two ranks
//    arrive in the order sent, whatever their group, so a stage receives in
//    its neighbour's sending order (known: the neighbour's pipelineOrder)
//    and keeps what arrives before it is needed. That happens only when one
//    rank is both neighbours (two stages with virtual stages: activations
//    and gradients share each direction); otherwise every direction of a
//    link carries one kind, sent in the order the receiver needs it.
#pragma once

#include <memory>
#include <vector>

#include "hpu/comm/process_group.h"
#include "hpu/core/strategies/pipeline_work.h"

namespace hpu::core {

class StageLinks {
 public:
  // A neighbour: the groups {previous stage, next stage} (ranks ascending)
  // that carry activations and gradients between it and this stage.
  struct Link {
    std::unique_ptr<comm::ProcessGroup> activations, gradients;
  };
  // Links to the previous and next stage (empty at the ends of a pipeline
  // without virtual stages); received tensors go to `device`.
  StageLinks(device::Device& device, Link previous, Link next)
      : device_(device), previous_(std::move(previous)), next_(std::move(next)) {}

  // Activations to the next stage, and from the previous one (a new tensor
  // of `spec`'s shape and dtype).
  void sendForward(const Tensor& output) { send(*next_.activations, output); }
  Tensor recvForward(const PipelineModule::StageInput& spec) { return recv(*previous_.activations, spec); }
  // Gradients to the previous stage, and from the next one (of `spec`, the
  // shape and dtype of the output they are the gradient of).
  void sendBackward(const Tensor& grad) { send(*previous_.gradients, grad); }
  Tensor recvBackward(const PipelineModule::StageInput& spec) { return recv(*next_.gradients, spec); }
  void observe(const std::shared_ptr<comm::CollectiveObserver>& observer);

 private:
  static void send(comm::ProcessGroup& pair, const Tensor& t);
  Tensor recv(comm::ProcessGroup& pair, const PipelineModule::StageInput& spec);

  device::Device& device_;
  Link previous_, next_;
};

// Runs `micro_batches` through this stage (`chunks` model chunks of stage
// `stage` of `stages`) as described above; returns the last stage's losses
// (on the last stage; zeros elsewhere and without values).
std::vector<double> runSchedule(PipelineWork& work, StageLinks& links, int stage, int stages, int chunks,
                                std::size_t micro_batches, bool backward);

}  // namespace hpu::core
