#include "hpu/core/nn/init.h"

#include <algorithm>
#include <vector>

#include "hpu/device/numerics.h"

namespace hpu::core::nn {

Tensor uniformInit(InitContext& ctx, const Shape& shape, float bound) {
  if (ctx.device.shapeOnly()) return Tensor::empty(ctx.device, shape, ctx.param_dtype);
  std::vector<float> v(static_cast<std::size_t>(shape.numel()));
  for (float& x : v) x = ctx.rng.uniform(-bound, bound);
  return Tensor::fromHost(ctx.device, shape, v, ctx.param_dtype);
}

Tensor normalInit(InitContext& ctx, const Shape& shape, float std) {
  if (ctx.device.shapeOnly()) return Tensor::empty(ctx.device, shape, ctx.param_dtype);
  std::vector<float> v(static_cast<std::size_t>(shape.numel()));
  for (float& x : v) x = std * ctx.rng.normal();
  return Tensor::fromHost(ctx.device, shape, v, ctx.param_dtype);
}

void fillNormal(InitContext& ctx, const Tensor& t, float std) {
  if (t.shapeOnly()) return;
  float* v = Tensor(t).data();
  for (std::int64_t i = 0; i < t.numel(); ++i) v[i] = std * ctx.rng.normal();
  device::roundInPlace({v, static_cast<std::size_t>(t.numel())}, t.dtype());
}

void fillConstant(const Tensor& t, float value) {
  if (!t.shapeOnly()) std::fill_n(Tensor(t).data(), t.numel(), value);
}

Tensor constantInit(InitContext& ctx, const Shape& shape, float value) {
  return Tensor::full(ctx.device, shape, value, ctx.param_dtype);
}

}  // namespace hpu::core::nn
