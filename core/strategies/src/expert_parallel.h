// Expert parallelism over data-parallel replicas (DeepSpeed-MoE's and
// Megatron-LM's layout), shared by the strategies that offer it
// (ModelParallelStrategy, HPUDeepSpeedStrategy): `ep` consecutive replicas
// split every MoE layer's experts between them (the model's
// InitContext::expert_parallel) and exchange tokens with all-to-alls; the
// rest of the model stays replicated. The replicas holding the same experts
// (dp / ep of them) average those experts' gradients scaled by 1 / ep: an
// expert's gradient already sums its expert-parallel group's tokens, so it
// becomes the data-parallel average one device's copy would get. Under ZeRO
// they share the experts' optimizer state between them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm_parallel_group.h"
#include "hpu/comm/process_group.h"
#include "hpu/core/nn/flat_parameters.h"
#include "hpu/core/nn/module.h"

namespace hpu::core {

struct ExpertGroups {
  std::unique_ptr<CommParallelGroup> experts;        // the replicas this rank's MoE layers split their experts across
  std::unique_ptr<comm::ProcessGroup> same_experts;  // the replicas holding this rank's experts

  // Sets `observer` on both groups (and the experts' subgroups).
  void observe(const std::shared_ptr<comm::CollectiveObserver>& observer);
  // Releases both; the strategy calls it before releasing the group they were split from.
  void reset();
};

// This rank's expert groups in `world`, whose data-parallel replicas are
// `model` consecutive ranks each, `dp` of them (rank r is in replica
// r / model, and at place r % model in it). Every rank of `world` calls it.
// REQUIRES: ep > 1 divides dp.
ExpertGroups splitExpertGroups(comm::ProcessGroup& world, int rank, int dp, int model, int ep);

// Refuses a layout: UsageError "trainer.strategy.init_args.expert_parallel_size=<ep>: <why>".
[[noreturn]] void refuseExpertParallelSize(int ep, const std::string& why);

// Per bucket of `params`: whether it holds experts (FlatParameters keeps
// them in buckets of their own). With ep > 1, refuses a model without any,
// trainable or among `frozen` (a LoRA run's experts are frozen, and split
// all the same).
std::vector<bool> expertBuckets(const nn::FlatParameters& params, const std::vector<nn::NamedTensor>& frozen, int ep);

// Forward hooks of a model whose experts are split across ranks: once the
// backward of a block whose children a rank may leave uncalled (a MoE
// block, Module::zero3Leaf) is over, the experts that got no gradient (no
// rank routed a token to them) count as ready with zero gradients
// (FlatParameters::completeGrads). Every rank then reports its buckets at
// the same point of backward, so their reductions and the blocks'
// all-to-alls are issued in one order on every rank.
class ExpertGradientCompletion final : public nn::ForwardHooks {
 public:
  // `params` outlives every forward of the model.
  explicit ExpertGradientCompletion(nn::FlatParameters& params) : params_(params) {}
  void before(nn::Module& m) override;
  void after(nn::Module&) override {}

 private:
  nn::FlatParameters& params_;
};

}  // namespace hpu::core
