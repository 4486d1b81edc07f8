#include "hpu/core/tensor/leaf.h"

#include "tensor_access.h"

namespace hpu::core {

using detail::TensorAccess;

Leaf::Leaf(const Tensor& tensor) : impl_(TensorAccess::shared(tensor)) {}

void Leaf::rebind(std::shared_ptr<device::Buffer> buffer, std::int64_t offset) const {
  impl_->storage = std::move(buffer);
  impl_->offset = offset;
}

detail::AutogradState& Leaf::state() const { return TensorAccess::autograd(*impl_); }

void Leaf::setGrad(const Tensor& grad, bool valid) const {
  state().grad = TensorAccess::shared(grad);
  state().grad_valid = valid;
}

void Leaf::releaseGrad() const {
  state().grad.reset();
  state().grad_valid = false;
}

void Leaf::markGradValid() const { state().grad_valid = true; }

void Leaf::onGradNeeded(std::function<void()> allocate) const { state().on_grad_needed = std::move(allocate); }

void Leaf::onGradReady(std::function<void()> ready) const { state().on_grad_ready = std::move(ready); }

void Leaf::resetUses() const { state().pending_uses = 0; }

int Leaf::pendingUses() const { return impl_->autograd ? impl_->autograd->pending_uses : 0; }

}  // namespace hpu::core
