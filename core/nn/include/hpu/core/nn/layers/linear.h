// Linear (torch.nn.Linear): y = x W^T + b over the last dimension; weight
// [out, in] and bias [out] initialised U(+-1/sqrt(in)), as torch does.
#pragma once

#include <spdlog/fmt/fmt.h>

#include <cmath>
#include <optional>

#include "hpu/core/nn/init.h"
#include "hpu/core/nn/layer.h"
#include "hpu/core/nn/layers/activation.h"
#include "hpu/core/nn/layers/dropout.h"
#include "hpu/core/ops/ops.h"

namespace hpu::core::nn {

class Linear : public Module {
 public:
  Linear(InitContext& ctx, std::int64_t in_features, std::int64_t out_features, bool bias = true) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(in_features));
    weight = registerParameter("weight", uniformInit(ctx, {out_features, in_features}, bound));
    if (bias) this->bias = registerParameter("bias", uniformInit(ctx, {out_features}, bound));
  }
  std::string typeName() const override { return "Linear"; }
  std::string describe() const override {
    return fmt::format("in_features={}, out_features={}, bias={}", weight.size(1), weight.size(0), bias.defined());
  }
  Tensor forward(const Tensor& x) override { return ops::linear(x, weight, bias); }
  // With a ReLU after it, and a Dropout after that: ops::linearRelu.
  std::size_t fusesWith(std::span<Module* const> next) const override {
    const auto* act = next.empty() ? nullptr : dynamic_cast<const Activation*>(next[0]);
    if (act == nullptr || act->kind() != ActivationKind::kReLU) return 0;
    return next.size() > 1 && dynamic_cast<const Dropout*>(next[1]) != nullptr ? 2 : 1;
  }
  Tensor forwardFused(std::span<Module* const> fused, const Tensor& x, Shape& own_output) override {
    std::optional<ops::FusedDropout> dropout;
    if (fused.size() > 1) {
      const auto& d = dynamic_cast<const Dropout&>(*fused[1]);
      dropout = ops::FusedDropout{d.p(), d.training(), &d.rng()};
    }
    Tensor y = ops::linearRelu(x, weight, bias, {}, dropout);
    own_output = y.shape();
    return y;
  }

  Tensor weight, bias;
};

inline const LayerRegistration kLinearLayer{
    torchLayerSchema("Linear",
                     {{"out_features", config::Type::integer().min(1), "null", "Output features."},
                      {"in_features", config::Type::optional(config::Type::integer().min(1)), "null",
                       "Input features (inferred; checked if given)."},
                      {"bias", config::Type::boolean(), "true", "Learn an additive bias."}},
                     "Fully connected layer over the last dimension."),
    [](const config::Params& p, InitContext& ctx, const Shape& in, const std::string& where) {
      const std::int64_t features = in[-1];
      if (p.has("in_features") && p.getInt("in_features") != features)
        layerMisfit(where, fmt::format("in_features is {} but the previous layer gives {} features ({} per sample)",
                                       p.getInt("in_features"), features, in.str()));
      Shape out = in;
      out[-1] = p.getInt("out_features");
      return LayerBuild{std::make_shared<Linear>(ctx, features, out[-1], p.getBool("bias")), out};
    }};

}  // namespace hpu::core::nn
