// Conv1D, Hugging Face's (GPT-2's linear layer despite its name): y = x W + b
// with the weight stored [in, out]; weight N(0, 0.02), bias zeros. Split
// across a tensor-parallel group as Linear is (linear.h): column splits the
// weight's columns and the bias, row its rows.
#pragma once

#include <spdlog/fmt/fmt.h>

#include "hpu/core/nn/init.h"
#include "hpu/core/nn/layer.h"
#include "hpu/core/nn/layers/linear.h"
#include "hpu/core/ops/ops.h"

namespace hpu::core::nn {

class Conv1D : public Module {
 public:
  // in_features and out_features are the whole layer's.
  Conv1D(InitContext& ctx, std::int64_t in_features, std::int64_t out_features, float std = 0.02f,
         LinearParallel parallel = {})
      : parallel_(parallel) {
    const LinearParallel::Local p = parallel.localPart(in_features, out_features, /*weight_in_out=*/true);
    weight = registerParameter("weight", normalInit(ctx, {p.in, p.out}, std, p.weight), p.weight);
    bias = registerParameter("bias", constantInit(ctx, {p.out}, 0.0f), p.bias);
  }
  std::string typeName() const override { return "Conv1D"; }
  std::string describe() const override {
    const Shape full = ownParameters().front().shard.fullShape(weight.shape());
    return fmt::format("nx={}, nf={}{}", full[0], full[1], parallel_.describe());
  }
  Tensor forward(const Tensor& x) override {
    if (parallel_.split == ParallelSplit::kRow)
      return ops::fromParallelRegion(ops::linear(x, weight, Tensor(), {.weight_in_out = true}), *parallel_.group, bias);
    return ops::linear(x, weight, bias, {.weight_in_out = true});
  }
  const LinearParallel& parallel() const { return parallel_; }
  Tensor weight, bias;

 private:
  LinearParallel parallel_;
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
