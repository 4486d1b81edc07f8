// RMSNorm (Llama's LlamaRMSNorm, torch.nn.RMSNorm): weight * x /
// sqrt(mean(x^2) + eps) over the last dimension; weight initialised to ones.
#pragma once

#include <spdlog/fmt/fmt.h>

#include "hpu/core/nn/init.h"
#include "hpu/core/nn/layer.h"
#include "hpu/core/ops/ops.h"
#include "hpu/core/ops/parallel.h"

namespace hpu::core::nn {

class RMSNorm : public Module {
 public:
  RMSNorm(InitContext& ctx, std::int64_t size, float eps = 1e-6f) : eps_(eps), tp_(ctx.tensor_parallel) {
    weight = registerParameter("weight", constantInit(ctx, {size}, 1.0f));
  }
  std::string typeName() const override { return "RMSNorm"; }
  std::string describe() const override { return fmt::format("{}, eps={}", weight.size(0), eps_); }
  // Under sequence parallelism each rank normalises its positions: the
  // weight's gradient is summed over the tensor-parallel group.
  Tensor forward(const Tensor& x) override {
    return ops::rmsNorm(x, tp_ ? ops::sequenceParallelParameter(weight, *tp_) : weight, eps_);
  }
  Tensor weight;

 private:
  float eps_;
  ops::ParallelGroup* tp_;
};

inline const LayerRegistration kRMSNormLayer{
    torchLayerSchema("RMSNorm", {{"eps", config::Type::real().min(0.0, true), "1.0e-06", "Added to the mean square."}},
                     "Root-mean-square normalisation over the last dimension (Llama's)."),
    [](const config::Params& p, InitContext& ctx, const Shape& in, const std::string&) {
      return LayerBuild{std::make_shared<RMSNorm>(ctx, in[in.ndim() - 1], static_cast<float>(p.getFloat("eps"))), in};
    }};

}  // namespace hpu::core::nn
