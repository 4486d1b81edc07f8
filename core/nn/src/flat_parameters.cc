#include "hpu/core/nn/flat_parameters.h"

#include <algorithm>
#include <cstring>

#include "hpu/core/tensor/leaf.h"
#include "hpu/device/check.h"

namespace hpu::core::nn {

FlatParameters::FlatParameters(const Module& module, device::Device& device, std::int64_t bucket_cap_bytes,
                               bool persistent_grads, std::optional<DType> grad_dtype)
    : device_(&device), persistent_grads_(persistent_grads), grad_dtype_(grad_dtype) {
  std::vector<NamedTensor> params;
  for (NamedTensor& p : module.namedParameters()) (p.tensor.requiresGrad() ? params : frozen_).push_back(std::move(p));
  std::reverse(params.begin(), params.end());
  const std::int64_t cap = std::max<std::int64_t>(1, bucket_cap_bytes / static_cast<std::int64_t>(sizeof(float)));
  std::vector<std::vector<NamedTensor>> groups;
  std::int64_t in_group = 0;
  for (const NamedTensor& p : params) {
    HPU_CHECK(device::isFloating(p.tensor.dtype()), "parameter {} of dtype {}", p.name,
              device::dtypeName(p.tensor.dtype()));
    // A bucket holds one dtype (fp8 inference keeps quantized weights beside
    // bf16 ones), and experts (under expert parallelism) or none: their
    // gradients are reduced among other ranks.
    if (groups.empty() || in_group + p.tensor.numel() > cap ||
        groups.back().front().tensor.dtype() != p.tensor.dtype() ||
        groups.back().front().expert_parallel != p.expert_parallel) {
      groups.emplace_back();
      in_group = 0;
    }
    groups.back().push_back(p);
    in_group += p.tensor.numel();
  }
  for (auto& group : groups) {
    ParamBucket b;
    for (const NamedTensor& p : group) b.numel += p.tensor.numel();
    const DType dtype = group.front().tensor.dtype();
    b.dtype = dtype;
    b.values = std::make_shared<device::Buffer>(device.allocator().allocate(dtype, static_cast<std::size_t>(b.numel)));
    std::int64_t offset = 0;
    for (const NamedTensor& p : group) {
      HPU_CHECK(p.tensor.dtype() == dtype, "mixed parameter dtypes in one bucket");
      if (!device.shapeOnly())
        std::memcpy(b.values->as<float>().data() + offset, p.tensor.data(),
                    static_cast<std::size_t>(p.tensor.numel()) * sizeof(float));
      Leaf(p.tensor).rebind(b.values, offset);
      bucket_of_[Leaf(p.tensor).id()] = buckets_.size();
      b.members.push_back(p);
      b.offsets.push_back(offset);
      offset += p.tensor.numel();
    }
    numel_ += b.numel;
    buckets_.push_back(std::move(b));
  }
  pending_params_.assign(buckets_.size(), 0);
  for (const auto& b : buckets_) counted_.emplace_back(b.members.size(), false);
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    if (persistent_grads_) {
      allocateGrads(i);
      continue;
    }
    for (auto& m : buckets_[i].members) Leaf(m.tensor).onGradNeeded([this, i] { allocateGrads(i); });
  }
}

void FlatParameters::allocateGrads(std::size_t i) {
  ParamBucket& b = buckets_[i];
  const DType dtype = grad_dtype_.value_or(b.dtype);
  b.grads = std::make_shared<device::Buffer>(device_->allocator().allocate(dtype, static_cast<std::size_t>(b.numel)));
  for (std::size_t j = 0; j < b.members.size(); ++j) {
    const Tensor& t = b.members[j].tensor;
    Leaf(t).setGrad(Tensor::view(b.grads, b.offsets[j], t.shape(), dtype), false);
  }
}

void FlatParameters::releaseGrads(std::size_t i) {
  HPU_CHECK(!persistent_grads_, "releaseGrads on persistent gradients");
  ParamBucket& b = buckets_[i];
  for (auto& m : b.members) Leaf(m.tensor).releaseGrad();
  b.grads.reset();
}

void FlatParameters::releaseValues(std::size_t i) {
  ParamBucket& b = buckets_[i];
  for (auto& m : b.members) Leaf(m.tensor).rebind(nullptr, 0);
  b.values.reset();
}

void FlatParameters::allocateValues(std::size_t i) {
  ParamBucket& b = buckets_[i];
  if (b.values) return;
  b.values =
      std::make_shared<device::Buffer>(device_->allocator().allocate(b.dtype, static_cast<std::size_t>(b.numel)));
  for (std::size_t j = 0; j < b.members.size(); ++j) Leaf(b.members[j].tensor).rebind(b.values, b.offsets[j]);
}

void FlatParameters::moveTo(device::Device& device) {
  for (const ParamBucket& b : buckets_)
    HPU_CHECK(b.values == nullptr && b.grads == nullptr, "moveTo {} with a bucket still allocated", device.name());
  device_ = &device;
}

std::size_t FlatParameters::bucketOf(const Tensor& param) const { return bucket_of_.at(Leaf(param).id()); }

bool FlatParameters::bucketed(const Tensor& param) const { return bucket_of_.count(Leaf(param).id()) != 0; }

void FlatParameters::invalidateGrads() {
  for (auto& b : buckets_)
    for (auto& m : b.members) m.tensor.invalidateGrad();
}

void FlatParameters::zeroMissingGrads() {
  for (std::size_t bi = 0; bi < buckets_.size(); ++bi)
    if (!buckets_[bi].grads) allocateGrads(bi);
  for (auto& b : buckets_)
    for (std::size_t i = 0; i < b.members.size(); ++i) {
      const Tensor& t = b.members[i].tensor;
      if (t.gradValid()) continue;
      if (!device_->shapeOnly())
        std::memset(b.grads->as<float>().data() + b.offsets[i], 0, static_cast<std::size_t>(t.numel()) * sizeof(float));
      Leaf(t).markGradValid();
    }
}

void FlatParameters::setBucketReadyCallback(std::function<void(std::size_t)> ready) {
  ready_ = std::move(ready);
  for (std::size_t bi = 0; bi < buckets_.size(); ++bi)
    for (std::size_t i = 0; i < buckets_[bi].members.size(); ++i) {
      const Leaf leaf(buckets_[bi].members[i].tensor);
      if (!ready_)
        leaf.onGradReady(nullptr);
      else
        leaf.onGradReady([this, bi, i] { countReady(bi, i); });
    }
}

void FlatParameters::countReady(std::size_t bucket, std::size_t member) {
  counted_[bucket][member] = true;
  if (--pending_params_[bucket] != 0 || !ready_) return;
  while (next_ready_ < buckets_.size() && pending_params_[next_ready_] == 0) ready_(next_ready_++);
}

void FlatParameters::completeGrads(const Module& module) {
  for (const NamedTensor& p : module.namedParameters()) {
    if (!bucketed(p.tensor)) continue;
    const std::size_t bi = bucketOf(p.tensor);
    ParamBucket& b = buckets_[bi];
    for (std::size_t i = 0; i < b.members.size(); ++i) {
      if (!b.members[i].tensor.sameAs(p.tensor) || counted_[bi][i] || Leaf(p.tensor).pendingUses() > 0) continue;
      if (!b.grads) allocateGrads(bi);
      if (!p.tensor.gradValid()) {
        if (!device_->shapeOnly())
          std::memset(b.grads->as<float>().data() + b.offsets[i], 0,
                      static_cast<std::size_t>(p.tensor.numel()) * sizeof(float));
        Leaf(p.tensor).markGradValid();
      }
      countReady(bi, i);
    }
  }
}

void FlatParameters::beginStep() {
  next_ready_ = 0;
  for (auto& c : counted_) std::fill(c.begin(), c.end(), false);
  for (std::size_t bi = 0; bi < buckets_.size(); ++bi) {
    pending_params_[bi] = static_cast<int>(buckets_[bi].members.size());
    for (auto& m : buckets_[bi].members) Leaf(m.tensor).resetUses();
  }
}

}  // namespace hpu::core::nn
