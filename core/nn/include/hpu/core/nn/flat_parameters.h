// A module's parameters and gradients packed into flat, contiguous buckets
// on its device: every parameter (and its gradient) becomes a view into its
// bucket. Optimizers, gradient all-reduce, ZeRO sharding and checkpoints then
// work on whole buckets or slices of them, never on scattered tensors.
//
// Buckets hold parameters in reverse registration order, at most
// `bucket_cap_bytes` each (a larger parameter gets a bucket of its own): the
// gradients of the last layers are complete first in backward, so their
// bucket can be all-reduced while backward goes on (as DDP does). A bucket
// holds one dtype, and either experts of expert parallelism
// (NamedTensor::expert_parallel > 1) or none.
//
// Parameters that do not require a gradient when the buckets are made (a
// LoRA model's frozen base weights) stay out of them: no gradient, no
// optimizer slice, no ZeRO shard; they keep their own storage (frozen()).
// Freezing later (BackboneFinetuning) keeps a parameter in its bucket.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "hpu/core/nn/module.h"

namespace hpu::core::nn {

struct ParamBucket {
  std::shared_ptr<device::Buffer> values;
  std::shared_ptr<device::Buffer> grads;
  std::vector<NamedTensor> members;   // views into `values`
  std::vector<std::int64_t> offsets;  // element offset of each member
  std::int64_t numel = 0;
  DType dtype = DType::kFloat32;

  std::span<float> valueSpan() { return values->as<float>().first(static_cast<std::size_t>(numel)); }
  std::span<float> gradSpan() { return grads->as<float>().first(static_cast<std::size_t>(numel)); }
};

class FlatParameters {
 public:
  // Moves `module`'s parameters into buckets (values copied, then every
  // parameter handle rebound to its bucket view). With `persistent_grads`
  // false, a bucket's gradient buffer is allocated when backward first needs
  // it and lives until releaseGrads(bucket) (ZeRO-2 keeps only shards).
  // Gradients have their bucket's dtype unless `grad_dtype` says otherwise
  // (DeepSpeed's bf16 optimizer accumulates a bf16 model's gradients in fp32).
  FlatParameters(const Module& module, device::Device& device, std::int64_t bucket_cap_bytes,
                 bool persistent_grads = true, std::optional<DType> grad_dtype = std::nullopt);

  std::vector<ParamBucket>& buckets() { return buckets_; }
  const std::vector<ParamBucket>& buckets() const { return buckets_; }
  std::int64_t numel() const { return numel_; }
  // The bucket holding parameter `param`. REQUIRES: one of the module's.
  std::size_t bucketOf(const Tensor& param) const;
  // Whether `param` is in a bucket (false: frozen when the buckets were made).
  bool bucketed(const Tensor& param) const;
  // The parameters left out of the buckets, in registration order.
  const std::vector<NamedTensor>& frozen() const { return frozen_; }

  // optimizer.zero_grad(): the next backward overwrites every gradient.
  void invalidateGrads();
  // Gives parameters that received no gradient this step a zero gradient,
  // so whole buckets can be reduced and stepped.
  void zeroMissingGrads();
  // Calls `ready(bucket index)` during backward as soon as every parameter
  // of a bucket, and of every bucket before it, has its final gradient
  // (nullptr: no notification): buckets are reported in index order, so
  // ranks whose parameters are used differently (a mixture of experts'
  // experts no token chose) still start their reductions in one order, as
  // torch's DDP reducer launches its buckets. A bucket held back by an
  // unused parameter is left to zeroMissingGrads at the end of backward.
  void setBucketReadyCallback(std::function<void(std::size_t)> ready);
  // Re-arms the per-step readiness counters (call before each forward).
  void beginStep();
  // Gives every parameter of `module` and its descendants that got no
  // gradient in this backward a zero one and counts it ready. Call when the
  // module's backward is over (a ZeRO-3 leaf, Module::zero3Leaf, whose
  // experts some ranks did not call): every rank then reports its buckets
  // at the same point of backward, whichever experts its tokens chose.
  void completeGrads(const Module& module);
  // Frees bucket `i`'s gradient buffer (non-persistent gradients only); the
  // next backward allocates it again.
  void releaseGrads(std::size_t i);
  bool gradsAllocated(std::size_t i) const { return buckets_[i].grads != nullptr; }
  // Frees / re-allocates bucket `i`'s parameter values (ZeRO-3 between
  // steps). While released, its parameters must not be used.
  void releaseValues(std::size_t i);
  void allocateValues(std::size_t i);
  bool valuesAllocated(std::size_t i) const { return buckets_[i].values != nullptr; }
  // Allocates values and gradients on `device` from now on (ZeRO-3 builds
  // its buckets in host memory). REQUIRES: every bucket's values and
  // gradients released.
  void moveTo(device::Device& device);

 private:
  void allocateGrads(std::size_t i);
  // Member `member` of bucket `bucket` has its final gradient: counts it,
  // and reports the buckets now complete in order.
  void countReady(std::size_t bucket, std::size_t member);

  device::Device* device_;
  bool persistent_grads_;
  std::optional<DType> grad_dtype_;
  std::vector<ParamBucket> buckets_;
  std::vector<NamedTensor> frozen_;
  std::vector<int> pending_params_;                         // per bucket, parameters without final gradient
  std::size_t next_ready_ = 0;                              // the first bucket not reported ready this step
  std::vector<std::vector<bool>> counted_;                  // per bucket member, counted ready this step
  std::unordered_map<const void*, std::size_t> bucket_of_;  // Leaf::id() -> bucket
  std::function<void(std::size_t)> ready_;
  std::int64_t numel_ = 0;
};

}  // namespace hpu::core::nn
