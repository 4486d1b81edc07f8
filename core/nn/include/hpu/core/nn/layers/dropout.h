// Dropout (torch.nn.Dropout): zeroes elements with probability p in
// training and scales the rest by 1/(1-p); identity in evaluation.
#pragma once

#include <spdlog/fmt/fmt.h>

#include "hpu/core/nn/layer.h"
#include "hpu/core/ops/ops.h"

namespace hpu::core::nn {

class Dropout : public Module {
 public:
  // Draws masks from `rng` (the trainer's dropout stream).
  Dropout(float p, Generator& rng) : p_(p), rng_(&rng) {}
  std::string typeName() const override { return "Dropout"; }
  std::string describe() const override { return fmt::format("p={}", p_); }
  Tensor forward(const Tensor& x) override { return ops::dropout(x, p_, training(), *rng_); }
  float p() const { return p_; }
  Generator& rng() const { return *rng_; }

 private:
  float p_;
  Generator* rng_;
};

inline const LayerRegistration kDropoutLayer{
    torchLayerSchema("Dropout",
                     {{"p", config::Type::real().min(0.0).max(1.0, true), "0.5", "Probability of zeroing an element."}},
                     "Randomly zeroes elements in training."),
    [](const config::Params& p, InitContext& ctx, const Shape& in, const std::string&) {
      return LayerBuild{std::make_shared<Dropout>(static_cast<float>(p.getFloat("p")), ctx.dropout_rng), in};
    }};

}  // namespace hpu::core::nn
