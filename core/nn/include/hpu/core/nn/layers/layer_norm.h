// LayerNorm (torch.nn.LayerNorm) over the last dimension: unit weight and
// zero bias, or none without elementwise_affine.
#pragma once

#include "hpu/core/nn/init.h"
#include "hpu/core/nn/layer.h"
#include "hpu/core/ops/ops.h"
#include "hpu/core/ops/parallel.h"

namespace hpu::core::nn {

class LayerNorm : public Module {
 public:
  LayerNorm(InitContext& ctx, std::int64_t normalized_size, float eps = 1e-5f, bool affine = true)
      : eps_(eps), tp_(ctx.tensor_parallel) {
    if (!affine) return;
    weight = registerParameter("weight", constantInit(ctx, {normalized_size}, 1.0f));
    bias = registerParameter("bias", constantInit(ctx, {normalized_size}, 0.0f));
  }
  std::string typeName() const override { return "LayerNorm"; }
  // Under sequence parallelism each rank normalises its positions: the
  // weight's and bias's gradients are summed over the tensor-parallel group.
  Tensor forward(const Tensor& x) override {
    if (!tp_ || !weight.defined()) return ops::layerNorm(x, weight, bias, eps_);
    return ops::layerNorm(x, ops::sequenceParallelParameter(weight, *tp_), ops::sequenceParallelParameter(bias, *tp_),
                          eps_);
  }
  Tensor weight, bias;

 private:
  float eps_;
  ops::ParallelGroup* tp_;
};

inline const LayerRegistration kLayerNormLayer{
    torchLayerSchema("LayerNorm",
                     {{"eps", config::Type::real().min(0.0, true), "1.0e-05", "Added to the variance."},
                      {"elementwise_affine", config::Type::boolean(), "true", "Learn a scale and a shift."}},
                     "Normalises over the last dimension."),
    [](const config::Params& p, InitContext& ctx, const Shape& in, const std::string&) {
      return LayerBuild{std::make_shared<LayerNorm>(ctx, in[in.ndim() - 1], static_cast<float>(p.getFloat("eps")),
                                                    p.getBool("elementwise_affine")),
                        in};
    }};

}  // namespace hpu::core::nn
