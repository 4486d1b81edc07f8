// Flatten (torch.nn.Flatten): collapses the dimensions from start_dim on.
#pragma once

#include "hpu/core/nn/layer.h"
#include "hpu/core/ops/ops.h"

namespace hpu::core::nn {

class Flatten : public Module {
 public:
  explicit Flatten(int start_dim = 1) : start_dim_(start_dim) {}
  std::string typeName() const override { return "Flatten"; }
  Tensor forward(const Tensor& x) override { return ops::flatten(x, start_dim_); }

 private:
  int start_dim_;
};

inline const LayerRegistration kFlattenLayer{
    torchLayerSchema("Flatten", {}, "Flattens each sample to a vector."),
    [](const config::Params&, InitContext&, const Shape& in, const std::string&) {
      return LayerBuild{std::make_shared<Flatten>(), Shape{in.numel()}};
    }};

}  // namespace hpu::core::nn
