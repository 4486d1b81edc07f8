#include "hpu/core/nn/init.h"

#include <algorithm>
#include <vector>

#include "hpu/device/numerics.h"

namespace hpu::core::nn {

namespace {

// Fills `values` (this rank's piece of a parameter, `shard`) by drawing the
// whole parameter in order, keeping the piece's values, rounded to `dtype`;
// vocabulary padding rows are zero. No host copy: a model as large as the
// host allows fits.
template <class Draw>
void drawInto(std::span<float> values, const Shape& shape, const Shard& shard, DType dtype, Draw draw) {
  if (shard.padding > 0) std::fill(values.begin(), values.end(), 0.0f);
  std::int64_t drawn = 0;
  shard.forEachRun(shape, [&](std::int64_t full, std::int64_t local, std::int64_t count) {
    for (; drawn < full; ++drawn) draw();
    for (std::int64_t i = 0; i < count; ++i) values[static_cast<std::size_t>(local + i)] = draw();
    drawn += count;
  });
  for (const std::int64_t total = shard.fullShape(shape).numel(); drawn < total; ++drawn) draw();
  if (dtype != DType::kFloat32) device::roundInPlace(values, dtype);
}

template <class Draw>
Tensor initialized(InitContext& ctx, const Shape& shape, const Shard& shard, Draw draw) {
  Tensor t = Tensor::empty(ctx.device, shape, ctx.param_dtype);
  if (!t.shapeOnly()) drawInto(t.values(), shape, shard, ctx.param_dtype, draw);
  return t;
}

}  // namespace

Tensor uniformInit(InitContext& ctx, const Shape& shape, float bound, const Shard& shard) {
  return initialized(ctx, shape, shard, [&] { return ctx.rng.uniform(-bound, bound); });
}

Tensor normalInit(InitContext& ctx, const Shape& shape, float std, const Shard& shard) {
  return initialized(ctx, shape, shard, [&] { return std * ctx.rng.normal(); });
}

void fillNormal(InitContext& ctx, const Tensor& t, float std, const Shard& shard) {
  if (!t.shapeOnly()) drawInto(Tensor(t).values(), t.shape(), shard, t.dtype(), [&] { return std * ctx.rng.normal(); });
}

void fillConstant(const Tensor& t, float value) {
  if (!t.shapeOnly()) std::fill_n(Tensor(t).data(), t.numel(), value);
}

Tensor constantInit(InitContext& ctx, const Shape& shape, float value) {
  return Tensor::full(ctx.device, shape, value, ctx.param_dtype);
}

}  // namespace hpu::core::nn
