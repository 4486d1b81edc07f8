#include "hpu/core/tensor/leaf.h"

#include "tensor_access.h"

namespace hpu::core {

using detail::TensorAccess;

Leaf::Leaf(const Tensor& tensor) : impl_(TensorAccess::shared(tensor)) {}

void Leaf::rebind(std::shared_ptr<device::Buffer> buffer, std::int64_t offset) const {
  impl_->storage = std::move(buffer);
  impl_->offset = offset;
}

void Leaf::setGrad(const Tensor& grad, bool valid) const {
  impl_->grad = TensorAccess::shared(grad);
  impl_->grad_valid = valid;
}

void Leaf::releaseGrad() const {
  impl_->grad.reset();
  impl_->grad_valid = false;
}

void Leaf::markGradValid() const { impl_->grad_valid = true; }

void Leaf::onGradNeeded(std::function<void()> allocate) const { impl_->on_grad_needed = std::move(allocate); }

void Leaf::onGradReady(std::function<void()> ready) const { impl_->on_grad_ready = std::move(ready); }

void Leaf::resetUses() const { impl_->pending_uses = 0; }

int Leaf::pendingUses() const { return impl_->pending_uses; }

}  // namespace hpu::core
