// DDP's gradient synchronisation over one process group: on an optimizer
// step's last micro-batch each bucket's gradients are averaged over the
// group as soon as the bucket is ready in backward, overlapping the rest of
// backward; micro-batches that do not step skip it (no_sync). Shared by the
// data-parallel strategies (hpu_parallel; ModelParallelStrategy's data
// dimension).
#pragma once

#include <algorithm>
#include <span>
#include <vector>

#include "hpu/comm/process_group.h"
#include "hpu/core/nn/flat_parameters.h"
#include "hpu/core/strategies/strategy.h"

namespace hpu::core {

class BucketAllreduce {
 public:
  // Where a bucket's gradients are averaged, when not over the group the
  // calls name: the ranks holding the same experts under expert
  // parallelism, the average then scaled by `scale` (1 / the expert-parallel
  // size: each expert's gradient already sums its expert-parallel group's
  // tokens).
  struct Reduction {
    comm::ProcessGroup* group = nullptr;  // null: the calls' group
    float scale = 1.0f;
  };
  void setup(const nn::FlatParameters& params, std::vector<Reduction> reductions = {}) {
    pending_.assign(params.buckets().size(), comm::Work());
    launched_.assign(params.buckets().size(), false);
    reductions_ = std::move(reductions);
    reductions_.resize(params.buckets().size());
  }

  void beforeBackward(comm::ProcessGroup& group, nn::FlatParameters& params, Strategy::MicroBatch m) {
    std::fill(launched_.begin(), launched_.end(), false);
    if (!m.last) {
      params.setBucketReadyCallback(nullptr);
      return;
    }
    params.setBucketReadyCallback([this, &group, &params](std::size_t i) { launch(group, params, i); });
  }

  void afterBackward(comm::ProcessGroup& group, nn::FlatParameters& params, Strategy::MicroBatch m) {
    if (!m.last) return;
    // Buckets with a parameter that got no gradient this step were never
    // reported ready: zero those gradients and reduce them now, in order.
    params.zeroMissingGrads();
    for (std::size_t i = 0; i < params.buckets().size(); ++i)
      if (!launched_[i]) launch(group, params, i);
    for (auto& w : pending_) w.wait(comm::Work::Clock::time_point::max());
    params.setBucketReadyCallback(nullptr);
  }

 private:
  void launch(comm::ProcessGroup& group, nn::FlatParameters& params, std::size_t i) {
    launched_[i] = true;
    const std::span<float> grads = params.buckets()[i].gradSpan();
    const Reduction& r = reductions_[i];
    if (r.scale != 1.0f && grads.data() != nullptr)
      for (float& g : grads) g *= r.scale;
    pending_[i] = (r.group != nullptr ? *r.group : group).allreduceAsync(grads, comm::ReduceOp::kAvg);
  }

  std::vector<comm::Work> pending_;
  std::vector<bool> launched_;
  std::vector<Reduction> reductions_;
};

}  // namespace hpu::core
