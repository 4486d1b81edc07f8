// Autocast: a block of layers with its own autocast setting, as a
// torch.autocast region (it sets enabled and dtype; the outer state returns
// after it).
#pragma once

#include <spdlog/fmt/fmt.h>

#include "hpu/core/nn/layer.h"
#include "hpu/core/nn/sequential.h"
#include "hpu/core/ops/autocast.h"

namespace hpu::core::nn {

class AutocastBlock final : public Sequential {
 public:
  AutocastBlock(bool enabled, DType dtype) : enabled_(enabled), dtype_(dtype) {}
  std::string typeName() const override { return "Autocast"; }
  std::string describe() const override {
    return enabled_ ? fmt::format("enabled, {}", device::dtypeName(dtype_)) : std::string("disabled");
  }
  Tensor forward(const Tensor& x) override {
    autocast::Scope scope(enabled_, dtype_);
    return Sequential::forward(x);
  }

 private:
  bool enabled_;
  DType dtype_;
};

inline const LayerRegistration kAutocastLayer{
    config::ComponentSchema{
        config::ComponentKind::kLayer,
        "Autocast",
        "",
        {"Autocast",
         "",
         {{"enabled", config::Type::boolean(), "true", "Autocast on (with dtype) or off inside the block."},
          {"dtype", config::Type::string({"bfloat16", "float16"}), "bfloat16", "Lower-precision dtype of the region."},
          {"layers", config::Type::list(config::Type::component({config::ComponentKind::kLayer})), "[]",
           "The layers of the region."}}},
        "A region of layers with its own autocast setting (torch.autocast semantics).",
        {"torch.autocast"}},
    [](const config::Params& p, InitContext& ctx, const Shape& in, const std::string& where) {
      auto block = std::make_shared<AutocastBlock>(
          p.getBool("enabled"), p.getString("dtype") == "float16" ? DType::kFloat16 : DType::kBFloat16);
      const Shape out = buildLayers(*block, listedLayers(p), ctx, in, where + ".init_args.layers");
      return LayerBuild{block, out};
    }};

}  // namespace hpu::core::nn
