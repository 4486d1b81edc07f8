#include "hpu/core/nn/init.h"

#include <vector>

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

Tensor constantInit(InitContext& ctx, const Shape& shape, float value) {
  return Tensor::full(ctx.device, shape, value, ctx.param_dtype);
}

}  // namespace hpu::core::nn
