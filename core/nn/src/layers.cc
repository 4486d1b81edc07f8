#include "hpu/core/nn/layers.h"

#include <spdlog/fmt/fmt.h>

#include <cmath>

namespace hpu::core::nn {
namespace {

// U(-bound, bound) on the device, as torch's kaiming_uniform_(a=sqrt(5)) and
// bias init reduce to with bound = 1/sqrt(fan_in).
Tensor uniform(InitContext& ctx, const Shape& shape, float bound) {
  if (ctx.device.shapeOnly()) return Tensor::empty(ctx.device, shape, ctx.param_dtype);
  std::vector<float> v(static_cast<std::size_t>(shape.numel()));
  for (float& x : v) x = ctx.rng.uniform(-bound, bound);
  return Tensor::fromHost(ctx.device, shape, v, ctx.param_dtype);
}

}  // namespace

Linear::Linear(InitContext& ctx, std::int64_t in, std::int64_t out, bool with_bias) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in));
  weight = registerParameter("weight", uniform(ctx, {out, in}, bound));
  if (with_bias) bias = registerParameter("bias", uniform(ctx, {out}, bound));
}

std::string Linear::describe() const {
  return fmt::format("in_features={}, out_features={}, bias={}", weight.size(1), weight.size(0), bias.defined());
}

Conv2d::Conv2d(InitContext& ctx, std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t stride,
               std::int64_t padding, bool with_bias)
    : options{stride, padding} {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in * k * k));
  weight = registerParameter("weight", uniform(ctx, {out, in, k, k}, bound));
  if (with_bias) bias = registerParameter("bias", uniform(ctx, {out}, bound));
}

std::string Conv2d::describe() const {
  return fmt::format("{}, {}, kernel_size={}, stride={}, padding={}", weight.size(1), weight.size(0), weight.size(2),
                     options.stride, options.padding);
}

std::string MaxPool2d::describe() const {
  return fmt::format("kernel_size={}, stride={}", options.kernel, options.stride ? options.stride : options.kernel);
}

std::string AvgPool2d::describe() const {
  return fmt::format("kernel_size={}, stride={}", options.kernel, options.stride ? options.stride : options.kernel);
}

std::string Activation::typeName() const {
  switch (kind_) {
    case ActivationKind::kReLU: return "ReLU";
    case ActivationKind::kGELU:
    case ActivationKind::kGELUTanh: return "GELU";
    case ActivationKind::kTanh: return "Tanh";
    case ActivationKind::kSigmoid: return "Sigmoid";
  }
  return "?";
}

Tensor Activation::forward(const Tensor& x) {
  switch (kind_) {
    case ActivationKind::kReLU: return ops::relu(x);
    case ActivationKind::kGELU: return ops::gelu(x, false);
    case ActivationKind::kGELUTanh: return ops::gelu(x, true);
    case ActivationKind::kTanh: return ops::tanh(x);
    case ActivationKind::kSigmoid: return ops::sigmoid(x);
  }
  return x;
}

std::string Dropout::describe() const { return fmt::format("p={}", p_); }

LayerNorm::LayerNorm(InitContext& ctx, std::int64_t d, float eps, bool affine) : eps_(eps) {
  if (!affine) return;
  weight = registerParameter("weight", Tensor::full(ctx.device, {d}, 1.0f, ctx.param_dtype));
  bias = registerParameter("bias", Tensor::zeros(ctx.device, {d}, ctx.param_dtype));
}

BatchNorm2d::BatchNorm2d(InitContext& ctx, std::int64_t c, float eps, float momentum, bool affine)
    : eps_(eps), momentum_(momentum) {
  if (affine) {
    weight = registerParameter("weight", Tensor::full(ctx.device, {c}, 1.0f, ctx.param_dtype));
    bias = registerParameter("bias", Tensor::zeros(ctx.device, {c}, ctx.param_dtype));
  }
  running_mean = registerBuffer("running_mean", Tensor::zeros(ctx.device, {c}));
  running_var = registerBuffer("running_var", Tensor::full(ctx.device, {c}, 1.0f));
}

Embedding::Embedding(InitContext& ctx, std::int64_t num, std::int64_t dim) {
  if (ctx.device.shapeOnly()) {
    weight = registerParameter("weight", Tensor::empty(ctx.device, {num, dim}, ctx.param_dtype));
    return;
  }
  std::vector<float> v(static_cast<std::size_t>(num * dim));
  for (float& x : v) x = ctx.rng.normal();
  weight = registerParameter("weight", Tensor::fromHost(ctx.device, {num, dim}, v, ctx.param_dtype));
}

void Sequential::append(std::shared_ptr<Module> m) { registerModule(std::to_string(size()), std::move(m)); }

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (const auto& [name, child] : children()) y = (*child)(y);
  return y;
}

}  // namespace hpu::core::nn
