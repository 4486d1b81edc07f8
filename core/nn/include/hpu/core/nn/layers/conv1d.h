// Conv1D, Hugging Face's (GPT-2's linear layer despite its name): y = x W + b
// with the weight stored [in, out]; weight N(0, 0.02), bias zeros.
#pragma once

#include <spdlog/fmt/fmt.h>

#include "hpu/core/nn/init.h"
#include "hpu/core/nn/layer.h"
#include "hpu/core/ops/ops.h"

namespace hpu::core::nn {

class Conv1D : public Module {
 public:
  Conv1D(InitContext& ctx, std::int64_t in_features, std::int64_t out_features, float std = 0.02f) {
    weight = registerParameter("weight", normalInit(ctx, {in_features, out_features}, std));
    bias = registerParameter("bias", constantInit(ctx, {out_features}, 0.0f));
  }
  std::string typeName() const override { return "Conv1D"; }
  std::string describe() const override { return fmt::format("nx={}, nf={}", weight.size(0), weight.size(1)); }
  Tensor forward(const Tensor& x) override { return ops::linear(x, weight, bias, {.weight_in_out = true}); }
  Tensor weight, bias;
};

inline const LayerRegistration kConv1DLayer{
    layerSchema("Conv1D", {{"nf", config::Type::integer().min(1), "null", "Output features."}},
                "Hugging Face's Conv1D: a linear layer with its weight stored [in, out] (GPT-2's).",
                "transformers.pytorch_utils"),
    [](const config::Params& p, InitContext& ctx, const Shape& in, const std::string&) {
      Shape out = in;
      out[-1] = p.getInt("nf");
      return LayerBuild{std::make_shared<Conv1D>(ctx, in[in.ndim() - 1], p.getInt("nf")), out};
    }};

}  // namespace hpu::core::nn
