// RMSNorm (Llama's LlamaRMSNorm, torch.nn.RMSNorm): weight * x /
// sqrt(mean(x^2) + eps) over the last dimension; weight initialised to ones.
// With `unit_offset` (Gemma's GemmaRMSNorm) the scale is (1 + weight), its
// weight initialised to zeros.
#pragma once

#include <spdlog/fmt/fmt.h>

#include "hpu/core/nn/init.h"
#include "hpu/core/nn/layer.h"
#include "hpu/core/ops/ops.h"
#include "hpu/core/ops/parallel.h"

namespace hpu::core::nn {

class RMSNorm : public Module {
 public:
  RMSNorm(InitContext& ctx, std::int64_t size, float eps = 1e-6f, bool unit_offset = false)
      : eps_(eps), tp_(ctx.tensor_parallel) {
    weight = registerParameter("weight", constantInit(ctx, {size}, unit_offset ? 0.0f : 1.0f));
    if (unit_offset) ones_ = Tensor::full(ctx.device, {size}, 1.0f);
  }
  std::string typeName() const override { return "RMSNorm"; }
  std::string describe() const override {
    return fmt::format("{}, eps={}{}", weight.size(0), eps_, ones_.defined() ? ", scale 1 + weight" : "");
  }
  // Under sequence parallelism each rank normalises its positions: the
  // weight's gradient is summed over the tensor-parallel group.
  Tensor forward(const Tensor& x) override {
    const Tensor w = tp_ ? ops::sequenceParallelParameter(weight, *tp_) : weight;
    return ops::rmsNorm(x, ones_.defined() ? ops::add(w, ones_) : w, eps_);
  }
  Tensor weight;

 private:
  float eps_;
  ops::ParallelGroup* tp_;
  Tensor ones_;  // fp32 ones with unit_offset: (1 + weight) in fp32 whatever the weight's dtype
};

inline const LayerRegistration kRMSNormLayer{
    torchLayerSchema("RMSNorm", {{"eps", config::Type::real().min(0.0, true), "1.0e-06", "Added to the mean square."}},
                     "Root-mean-square normalisation over the last dimension (Llama's)."),
    [](const config::Params& p, InitContext& ctx, const Shape& in, const std::string&) {
      return LayerBuild{std::make_shared<RMSNorm>(ctx, in[in.ndim() - 1], static_cast<float>(p.getFloat("eps"))), in};
    }};

}  // namespace hpu::core::nn
