// The tensor layer's own access to a tensor's state (detail::TensorImpl):
// for autograd and Leaf, never for code outside core/tensor.
#pragma once

#include <memory>
#include <utility>

#include "hpu/core/tensor/tensor.h"

namespace hpu::core::detail {

struct TensorAccess {
  static Tensor wrap(std::shared_ptr<TensorImpl> impl) { return Tensor(std::move(impl)); }
  static const std::shared_ptr<TensorImpl>& shared(const Tensor& t) { return t.impl_; }
  // A tensor's autograd state, created on first use.
  static AutogradState& autograd(TensorImpl& impl) {
    if (!impl.autograd) impl.autograd = std::make_shared<AutogradState>();
    return *impl.autograd;
  }
  static AutogradState& autograd(const Tensor& t) { return autograd(*t.impl_); }
  static bool hasAutograd(const Tensor& t) { return t.impl_->autograd != nullptr; }
  static std::shared_ptr<AutogradState> sharedAutograd(const Tensor& t) {
    autograd(t);
    return t.impl_->autograd;
  }
  // The gradient in `state` if it holds this step's values, else undefined.
  static Tensor gradOf(const AutogradState* state) {
    if (state == nullptr || !state->grad || !state->grad_valid) return {};
    return Tensor(state->grad);
  }
};

}  // namespace hpu::core::detail
