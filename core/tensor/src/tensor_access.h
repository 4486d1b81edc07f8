// The tensor layer's own access to a tensor's state (detail::TensorImpl):
// for autograd and Leaf, never for code outside core/tensor.
#pragma once

#include <memory>
#include <utility>

#include "hpu/core/tensor/tensor.h"

namespace hpu::core::detail {

struct TensorAccess {
  static TensorImpl& impl(const Tensor& t) { return *t.impl_; }
  static Tensor wrap(std::shared_ptr<TensorImpl> impl) { return Tensor(std::move(impl)); }
  static const std::shared_ptr<TensorImpl>& shared(const Tensor& t) { return t.impl_; }
};

}  // namespace hpu::core::detail
