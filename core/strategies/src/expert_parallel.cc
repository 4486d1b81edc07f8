#include "expert_parallel.h"

#include <algorithm>

#include <spdlog/fmt/fmt.h>

#include "hpu/core/base/errors.h"
#include "hpu/core/tensor/autograd.h"

namespace hpu::core {

void ExpertGroups::observe(const std::shared_ptr<comm::CollectiveObserver>& observer) {
  if (experts) experts->observe(observer);
  if (same_experts) same_experts->setObserver(observer);
}

void ExpertGroups::reset() {
  experts.reset();
  same_experts.reset();
}

ExpertGroups splitExpertGroups(comm::ProcessGroup& world, int rank, int dp, int model, int ep) {
  HPU_CHECK(ep > 1 && dp % ep == 0, "expert groups of {} replicas out of {}", ep, dp);
  const int d = rank / model;
  std::vector<int> ep_ranks, same_experts;
  for (int k = 0; k < ep; ++k) ep_ranks.push_back((d / ep * ep + k) * model + rank % model);
  for (int k = 0; k < dp / ep; ++k) same_experts.push_back((k * ep + d % ep) * model + rank % model);
  ExpertGroups out;
  out.experts = std::make_unique<CommParallelGroup>(world.split(ep_ranks));
  out.same_experts = world.split(same_experts);
  return out;
}

void refuseExpertParallelSize(int ep, const std::string& why) {
  throw UsageError(fmt::format("trainer.strategy.init_args.expert_parallel_size={}: {}", ep, why));
}

std::vector<bool> expertBuckets(const nn::FlatParameters& params, const std::vector<nn::NamedTensor>& frozen, int ep) {
  std::vector<bool> out;
  bool any = std::any_of(frozen.begin(), frozen.end(), [](const nn::NamedTensor& t) { return t.expert_parallel > 1; });
  for (const nn::ParamBucket& b : params.buckets()) {
    out.push_back(b.members.front().expert_parallel > 1);
    any = any || out.back();
  }
  if (ep > 1 && !any)
    refuseExpertParallelSize(ep, "the model has no mixture of experts to split (MixtralForCausalLM has); use "
                                 "expert_parallel_size 1");
  return out;
}

void ExpertGradientCompletion::before(nn::Module& m) {
  if (!m.zero3Leaf()) return;
  // Recorded before the block's forward: the tape runs it after the block's backward.
  if (autograd::Tape* tape = autograd::currentTape())
    tape->record([&params = params_, &m] { params.completeGrads(m); });
}

}  // namespace hpu::core
