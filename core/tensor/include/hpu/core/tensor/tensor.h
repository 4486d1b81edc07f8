// Tensors on an emulated HPU: a shared handle to a contiguous block of a
// device buffer (several tensors may view one buffer: parameters are views
// into their bucket), with a shape, a logical dtype and, for autograd, a
// gradient.
//
// Floating tensors hold float32 values rounded to their logical dtype (see
// device/dtype.h); integer tensors (class labels, token ids) hold int64.
// Tensors of a shape-only device hold no values at all. Copies of a Tensor
// share the same data. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hpu/core/tensor/shape.h"
#include "hpu/device/buffer.h"
#include "hpu/device/device.h"
#include "hpu/device/dtype.h"

namespace hpu::core {

using device::DType;

namespace detail {
struct TensorImpl;
// A tensor's autograd state, apart from its values: shared by every handle of
// the tensor and by the backward functions that route its gradient without
// reading its values (autograd::GradRef), so the values can go at their last
// use while the gradient still flows.
struct AutogradState {
  bool requires_grad = false;
  // The gradient (the tensor's shape; float32 unless the tensor is lower precision).
  std::shared_ptr<TensorImpl> grad;
  // Whether `grad` holds this step's values; if not, the next backward
  // contribution overwrites it instead of adding (no zero-fill needed).
  bool grad_valid = false;
  // Leaves only: uses recorded on the tape whose backward has not run yet,
  // and what to call when the last one has (DDP's bucket readiness).
  int pending_uses = 0;
  std::function<void()> on_grad_ready;
  // Leaves whose gradient storage is allocated on demand (ZeRO-2 buckets):
  // called when backward first needs `grad` and it is not there.
  std::function<void()> on_grad_needed;
};
// A tensor's state. Only the tensor layer reaches it (TensorAccess, in its
// sources): parameter storage goes through Leaf (leaf.h), ops through the
// autograd functions.
struct TensorImpl {
  std::shared_ptr<device::Buffer> storage;
  std::int64_t offset = 0;  // in elements
  Shape shape;
  DType dtype = DType::kFloat32;
  // Null until the tensor requires a gradient, has one or is referred to by
  // a GradRef (most tensors of an evaluation never are).
  std::shared_ptr<AutogradState> autograd;
};
struct TensorAccess;
}  // namespace detail

class Tensor {
 public:
  Tensor() = default;  // undefined

  // Uninitialised / zero-filled / copied-in device tensors.
  static Tensor empty(device::Device& dev, const Shape& shape, DType dtype = DType::kFloat32);
  static Tensor zeros(device::Device& dev, const Shape& shape, DType dtype = DType::kFloat32);
  static Tensor full(device::Device& dev, const Shape& shape, float value, DType dtype = DType::kFloat32);
  // Copies `values` (rounded to `dtype`). REQUIRES: values.size() == shape.numel(),
  // or no values on a shape-only device.
  static Tensor fromHost(device::Device& dev, const Shape& shape, std::span<const float> values,
                         DType dtype = DType::kFloat32);
  static Tensor fromHost(device::Device& dev, const Shape& shape, std::span<const std::int64_t> values);
  // A view of `count` elements of `buffer` at `offset`, shaped `shape`.
  static Tensor view(std::shared_ptr<device::Buffer> buffer, std::int64_t offset, const Shape& shape,
                     DType dtype);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl_->shape; }
  int ndim() const { return impl_->shape.ndim(); }
  std::int64_t size(int dim) const { return impl_->shape[dim]; }
  std::int64_t numel() const { return impl_->shape.numel(); }
  DType dtype() const { return impl_->dtype; }
  device::Device& device() const { return impl_->storage->device(); }
  // On a shape-only device: a shape, a dtype and memory accounting, no
  // values (data() is null; ops compute nothing).
  bool shapeOnly() const { return device().shapeOnly(); }

  // Element access; null for a shape-only tensor. REQUIRES: a floating
  // dtype (data) / int64 (labels).
  float* data();
  const float* data() const;
  std::int64_t* labels();
  const std::int64_t* labels() const;
  std::span<float> values() { return {data(), static_cast<std::size_t>(numel())}; }
  std::span<const float> values() const { return {data(), static_cast<std::size_t>(numel())}; }

  // The only element's value. REQUIRES: numel() == 1.
  float item() const;
  std::vector<float> toHost() const;

  // The same data with another shape (same numel); shares gradient-free
  // storage: for autograd-aware reshapes use ops::reshape.
  Tensor reshaped(const Shape& shape) const;
  // The same data, not tracked by autograd.
  Tensor detach() const;

  // Autograd.
  bool requiresGrad() const { return impl_ && impl_->autograd && impl_->autograd->requires_grad; }
  void setRequiresGrad(bool r);
  // The gradient, if backward produced one this step (undefined otherwise).
  Tensor grad() const;
  // Marks the gradient as not holding values (next backward overwrites it).
  void invalidateGrad() const;
  bool gradValid() const { return impl_ && impl_->autograd && impl_->autograd->grad_valid; }

  // Identity: two handles of the same tensor.
  bool sameAs(const Tensor& o) const { return impl_ == o.impl_; }
  // Where the elements live: a device buffer and the offset (in elements) into it.
  const std::shared_ptr<device::Buffer>& storage() const { return impl_->storage; }
  std::int64_t storageOffset() const { return impl_->offset; }
  // Whether this handle is its tensor's only one and the tensor its memory's
  // only user: an op handed it as an rvalue is its last use and may write
  // its output there, as a graph compiler reuses a tensor's memory after its
  // last use inside a graph.
  bool soleOwner() const { return impl_ != nullptr && impl_.use_count() == 1 && impl_->storage.use_count() == 1; }

 private:
  friend struct detail::TensorAccess;
  explicit Tensor(std::shared_ptr<detail::TensorImpl> impl) : impl_(std::move(impl)) {}

  std::shared_ptr<detail::TensorImpl> impl_;
};

// The operand record of a tensor for the device's lazy-mode graph.
device::OperandInfo operandInfo(const Tensor& t);

}  // namespace hpu::core
