#include "hpu/core/nn/init.h"

#include <algorithm>
#include <vector>

#include "hpu/device/numerics.h"

namespace hpu::core::nn {

namespace {

// A parameter of `shape` filled in place by `draw` (no host copy: a model
// as large as the host allows fits), rounded to the parameter dtype.
template <class Draw>
Tensor initialized(InitContext& ctx, const Shape& shape, Draw draw) {
  Tensor t = Tensor::empty(ctx.device, shape, ctx.param_dtype);
  if (t.shapeOnly()) return t;
  std::span<float> values = t.values();
  for (float& x : values) x = draw();
  if (ctx.param_dtype != DType::kFloat32) device::roundInPlace(values, ctx.param_dtype);
  return t;
}

}  // namespace

Tensor uniformInit(InitContext& ctx, const Shape& shape, float bound) {
  return initialized(ctx, shape, [&] { return ctx.rng.uniform(-bound, bound); });
}

Tensor normalInit(InitContext& ctx, const Shape& shape, float std) {
  return initialized(ctx, shape, [&] { return std * ctx.rng.normal(); });
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
