// Residual: x + f(x) for a block of layers f that keeps x's shape (a
// transformer's pre-norm attention and MLP sub-blocks).
#pragma once

#include <spdlog/fmt/fmt.h>

#include "hpu/core/nn/layer.h"
#include "hpu/core/nn/sequential.h"
#include "hpu/core/ops/ops.h"

namespace hpu::core::nn {

class Residual final : public Sequential {
 public:
  std::string typeName() const override { return "Residual"; }
  Tensor forward(const Tensor& x) override { return ops::add(x, Sequential::forward(x)); }
};

inline const LayerRegistration kResidualLayer{
    config::ComponentSchema{config::ComponentKind::kLayer,
                            "Residual",
                            "",
                            {"Residual",
                             "",
                             {{"layers", config::Type::list(config::Type::component({config::ComponentKind::kLayer})),
                               "[]", "The block f of x + f(x); it must keep the shape of its input."}}},
                            "A residual connection around a block of layers: x + f(x)."},
    [](const config::Params& p, InitContext& ctx, const Shape& in, const std::string& where) {
      auto block = std::make_shared<Residual>();
      const Shape out = buildLayers(*block, listedLayers(p), ctx, in, where + ".init_args.layers");
      if (!(out == in))
        layerMisfit(where, fmt::format("Residual: its layers turn a {} sample into {}; x + f(x) needs the same shape",
                                       in.str(), out.str()));
      return LayerBuild{block, out};
    }};

}  // namespace hpu::core::nn
