// Conv2d (torch.nn.Conv2d, square kernels, groups 1, dilation 1): weight
// [out, in, k, k] and bias [out] initialised U(+-1/sqrt(in k k)).
#pragma once

#include <spdlog/fmt/fmt.h>

#include <cmath>

#include "hpu/core/nn/init.h"
#include "hpu/core/nn/layer.h"
#include "hpu/core/nn/layers/pooling.h"
#include "hpu/core/ops/ops.h"

namespace hpu::core::nn {

class Conv2d : public Module {
 public:
  Conv2d(InitContext& ctx, std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size,
         std::int64_t stride = 1, std::int64_t padding = 0, bool bias = true)
      : options{stride, padding} {
    const float bound = 1.0f / std::sqrt(static_cast<float>(in_channels * kernel_size * kernel_size));
    weight =
        registerParameter("weight", uniformInit(ctx, {out_channels, in_channels, kernel_size, kernel_size}, bound));
    if (bias) this->bias = registerParameter("bias", uniformInit(ctx, {out_channels}, bound));
  }
  std::string typeName() const override { return "Conv2d"; }
  std::string describe() const override {
    return fmt::format("{}, {}, kernel_size={}, stride={}, padding={}", weight.size(1), weight.size(0), weight.size(2),
                       options.stride, options.padding);
  }
  Tensor forward(const Tensor& x) override { return ops::conv2d(x, weight, bias, options); }
  // With a 2x2 max pool after it: ops::conv2dMaxPool.
  std::size_t fusesWith(std::span<Module* const> next) const override {
    const auto* pool = next.empty() ? nullptr : dynamic_cast<const MaxPool2d*>(next[0]);
    return pool != nullptr && pool->options.kernel == 2 && (pool->options.stride == 0 || pool->options.stride == 2) &&
           pool->options.padding == 0;
  }
  Tensor forwardFused(std::span<Module* const>, const Tensor& x, Shape& own_output) override {
    Tensor y = ops::conv2dMaxPool(x, weight, bias, options);
    own_output = Shape{x.size(0), weight.size(0), sweptSize(x.size(2), weight.size(2), options.stride, options.padding),
                       sweptSize(x.size(3), weight.size(3), options.stride, options.padding)};
    return y;
  }

  Tensor weight, bias;
  ops::Conv2dOptions options;
};

inline const LayerRegistration kConv2dLayer{
    torchLayerSchema("Conv2d",
                     {{"out_channels", config::Type::integer().min(1), "null", "Output channels."},
                      {"kernel_size", config::Type::integer().min(1), "3", "Square kernel size."},
                      {"stride", config::Type::integer().min(1), "1", "Stride."},
                      {"padding", config::Type::integer().min(0), "0", "Zero padding on each side."},
                      {"bias", config::Type::boolean(), "true", "Learn an additive bias."}},
                     "2-D convolution."),
    [](const config::Params& p, InitContext& ctx, const Shape& in, const std::string& where) {
      if (in.ndim() != 3)
        layerMisfit(where, fmt::format("Conv2d needs [channels, height, width] inputs; got {}", in.str()));
      const std::int64_t out = p.getInt("out_channels"), k = p.getInt("kernel_size"), s = p.getInt("stride"),
                         pad = p.getInt("padding");
      const std::int64_t h = sweptSize(in[1], k, s, pad), w = sweptSize(in[2], k, s, pad);
      if (h <= 0 || w <= 0) layerMisfit(where, fmt::format("kernel {} does not fit the {} input", k, in.str()));
      return LayerBuild{std::make_shared<Conv2d>(ctx, in[0], out, k, s, pad, p.getBool("bias")), Shape{out, h, w}};
    }};

}  // namespace hpu::core::nn
