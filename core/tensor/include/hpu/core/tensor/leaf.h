// A leaf tensor (a parameter) as the code that owns its storage sees it:
// nn::FlatParameters moves a parameter's values and gradient into buckets and
// hooks backward's uses of it (DDP's bucket readiness, ZeRO-2's gradient
// storage on demand). Besides the ops and autograd, this is the only way
// into a tensor's state. A Leaf is a handle: it acts on every handle of the
// tensor. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "hpu/core/tensor/tensor.h"

namespace hpu::core {

class Leaf {
 public:
  explicit Leaf(const Tensor& tensor);

  // Moves the values to `buffer` at `offset` (elements); nullptr releases
  // them (the tensor must not be used until rebound).
  void rebind(std::shared_ptr<device::Buffer> buffer, std::int64_t offset) const;

  // The gradient's storage: `grad` (a view of the same shape), which already
  // holds this step's values if `valid`.
  void setGrad(const Tensor& grad, bool valid) const;
  // Drops the gradient's storage; backward calls onGradNeeded's function
  // when it next needs some.
  void releaseGrad() const;
  // The gradient holds this step's values (written by the storage's owner).
  void markGradValid() const;
  void onGradNeeded(std::function<void()> allocate) const;

  // Calls `ready` when the last use recorded on the tape since resetUses()
  // has been back-propagated; nullptr removes it.
  void onGradReady(std::function<void()> ready) const;
  void resetUses() const;
  // Uses recorded on the tape whose backward has not run yet.
  int pendingUses() const;

  // The same for every handle of one tensor (a key for maps).
  const void* id() const { return impl_.get(); }

 private:
  detail::AutogradState& state() const;  // created on first use

  std::shared_ptr<detail::TensorImpl> impl_;
};

}  // namespace hpu::core
