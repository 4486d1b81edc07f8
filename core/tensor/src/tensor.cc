#include "hpu/core/tensor/tensor.h"

#include <cstring>

#include "hpu/device/check.h"
#include "hpu/device/kernels/layout.h"
#include "hpu/device/numerics.h"
#include "tensor_access.h"

namespace hpu::core {

Tensor Tensor::empty(device::Device& dev, const Shape& shape, DType dtype) {
  dev.requireSupported(dtype);
  auto buffer =
      std::make_shared<device::Buffer>(dev.allocator().allocate(dtype, static_cast<std::size_t>(shape.numel())));
  return view(std::move(buffer), 0, shape, dtype);
}

Tensor Tensor::zeros(device::Device& dev, const Shape& shape, DType dtype) {
  Tensor t = empty(dev, shape, dtype);
  if (t.numel() > 0 && !dev.shapeOnly())
    std::memset(static_cast<char*>(t.impl_->storage->data()), 0,
                static_cast<std::size_t>(t.numel()) * device::physicalSize(dtype));
  return t;
}

Tensor Tensor::full(device::Device& dev, const Shape& shape, float value, DType dtype) {
  Tensor t = empty(dev, shape, dtype);
  if (dev.shapeOnly()) return t;
  std::span<float> v = t.values();
  std::fill(v.begin(), v.end(), value);
  device::roundInPlace(v, dtype);
  return t;
}

Tensor Tensor::fromHost(device::Device& dev, const Shape& shape, std::span<const float> values, DType dtype) {
  HPU_CHECK(static_cast<std::int64_t>(values.size()) == shape.numel() || (dev.shapeOnly() && values.empty()),
            "{} values for shape {}", values.size(), shape.str());
  Tensor t = empty(dev, shape, dtype);
  if (dev.shapeOnly()) return t;
  if (!values.empty()) device::kernels::copy(values.data(), t.data(), static_cast<std::int64_t>(values.size()));
  device::roundInPlace(t.values(), dtype);
  return t;
}

Tensor Tensor::fromHost(device::Device& dev, const Shape& shape, std::span<const std::int64_t> values) {
  HPU_CHECK(static_cast<std::int64_t>(values.size()) == shape.numel() || (dev.shapeOnly() && values.empty()),
            "{} values for shape {}", values.size(), shape.str());
  Tensor t = empty(dev, shape, DType::kInt64);
  if (!values.empty() && !dev.shapeOnly()) std::memcpy(t.labels(), values.data(), values.size() * sizeof(std::int64_t));
  return t;
}

Tensor Tensor::view(std::shared_ptr<device::Buffer> buffer, std::int64_t offset, const Shape& shape, DType dtype) {
  HPU_CHECK(offset + shape.numel() <= static_cast<std::int64_t>(buffer->numel()), "view {}+{} past {}", offset,
            shape.numel(), buffer->numel());
  auto impl = std::make_shared<detail::TensorImpl>();
  impl->storage = std::move(buffer);
  impl->offset = offset;
  impl->shape = shape;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

float* Tensor::data() {
  HPU_CHECK(device::isFloating(impl_->dtype), "data() of a {} tensor", device::dtypeName(impl_->dtype));
  auto* base = static_cast<float*>(impl_->storage->data());
  return base == nullptr ? nullptr : base + impl_->offset;
}

const float* Tensor::data() const { return const_cast<Tensor*>(this)->data(); }

std::int64_t* Tensor::labels() {
  HPU_CHECK(impl_->dtype == DType::kInt64, "labels() of a {} tensor", device::dtypeName(impl_->dtype));
  auto* base = static_cast<std::int64_t*>(impl_->storage->data());
  return base == nullptr ? nullptr : base + impl_->offset;
}

const std::int64_t* Tensor::labels() const { return const_cast<Tensor*>(this)->labels(); }

float Tensor::item() const {
  HPU_CHECK(numel() == 1, "item() of a tensor of shape {}", shape().str());
  HPU_CHECK(!shapeOnly(), "item() of a shape-only tensor (it holds no value)");
  return data()[0];
}

std::vector<float> Tensor::toHost() const {
  HPU_CHECK(!shapeOnly(), "toHost() of a shape-only tensor (it holds no values)");
  auto v = values();
  return {v.begin(), v.end()};
}

Tensor Tensor::reshaped(const Shape& shape) const {
  HPU_CHECK(shape.numel() == numel(), "reshape {} to {}", this->shape().str(), shape.str());
  return view(impl_->storage, impl_->offset, shape, impl_->dtype);
}

Tensor Tensor::detach() const { return view(impl_->storage, impl_->offset, impl_->shape, impl_->dtype); }

void Tensor::setRequiresGrad(bool r) {
  if (r || impl_->autograd) detail::TensorAccess::autograd(*this).requires_grad = r;
}

Tensor Tensor::grad() const { return impl_ ? detail::TensorAccess::gradOf(impl_->autograd.get()) : Tensor(); }

void Tensor::invalidateGrad() const {
  if (impl_ && impl_->autograd) impl_->autograd->grad_valid = false;
}

device::OperandInfo operandInfo(const Tensor& t) { return {t.shape().dims(), t.dtype(), t.requiresGrad()}; }

}  // namespace hpu::core
