// Views with another shape (no data moves, nothing recorded on the device).
#include <vector>

#include "hpu/core/ops/ops.h"
#include "op_support.h"

namespace hpu::core::ops {

using namespace detail;

Tensor reshape(const Tensor& x, const Shape& shape) {
  require(shape.numel() == x.numel(), "reshape", fmt::format("{} to {}", x.shape().str(), shape.str()));
  Tensor y = x.reshaped(shape);
  recordBackward(y, {&x}, [x, y] {
    if (Tensor gy = y.grad(); gy.defined()) accumulateGrad(x, gy.data());
  });
  return y;
}

Tensor flatten(const Tensor& x, int start_dim) {
  std::vector<std::int64_t> dims;
  for (int i = 0; i < start_dim; ++i) dims.push_back(x.size(i));
  dims.push_back(x.shape().tail(start_dim));
  return reshape(x, Shape(std::span<const std::int64_t>(dims)));
}

}  // namespace hpu::core::ops
