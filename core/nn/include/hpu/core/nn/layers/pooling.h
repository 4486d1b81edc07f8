// MaxPool2d and AvgPool2d (torch.nn's, square windows; average pooling
// counts padding, as count_include_pad=True).
#pragma once

#include <spdlog/fmt/fmt.h>

#include "hpu/core/nn/layer.h"
#include "hpu/core/ops/ops.h"

namespace hpu::core::nn {

// A pooling layer: `Name` is its type, `Pool` the op it runs.
template <const char* Name, Tensor (*Pool)(const Tensor&, const ops::Pool2dOptions&)>
class Pool2d : public Module {
 public:
  explicit Pool2d(ops::Pool2dOptions o) : options(o) {}
  std::string typeName() const override { return Name; }
  std::string describe() const override {
    return fmt::format("kernel_size={}, stride={}", options.kernel, options.stride ? options.stride : options.kernel);
  }
  Tensor forward(const Tensor& x) override { return Pool(x, options); }
  ops::Pool2dOptions options;
};
inline constexpr char kMaxPool2dName[] = "MaxPool2d";
inline constexpr char kAvgPool2dName[] = "AvgPool2d";
using MaxPool2d = Pool2d<kMaxPool2dName, ops::maxPool2d>;
using AvgPool2d = Pool2d<kAvgPool2dName, ops::avgPool2d>;

// The YAML form shared by both: the window, and the output shape rule.
template <class Pool>
LayerRegistration poolLayer(const char* name, const char* doc) {
  return LayerRegistration{
      torchLayerSchema(
          name,
          {{"kernel_size", config::Type::integer().min(1), "2", "Window size."},
           {"stride", config::Type::optional(config::Type::integer().min(1)), "null", "Stride (default: kernel_size)."},
           {"padding", config::Type::integer().min(0), "0", "Padding on each side."}},
          doc),
      [](const config::Params& p, InitContext&, const Shape& in, const std::string& where) {
        const ops::Pool2dOptions o{p.getInt("kernel_size"), p.has("stride") ? p.getInt("stride") : 0,
                                   p.getInt("padding")};
        if (in.ndim() != 3)
          layerMisfit(where, fmt::format("pooling needs [channels, height, width] inputs; got {}", in.str()));
        const std::int64_t s = o.stride ? o.stride : o.kernel;
        const std::int64_t h = sweptSize(in[1], o.kernel, s, o.padding), w = sweptSize(in[2], o.kernel, s, o.padding);
        if (h <= 0 || w <= 0)
          layerMisfit(where, fmt::format("kernel {} does not fit the {} input", o.kernel, in.str()));
        return LayerBuild{std::make_shared<Pool>(o), Shape{in[0], h, w}};
      }};
}
inline const LayerRegistration kMaxPool2dLayer = poolLayer<MaxPool2d>(kMaxPool2dName, "2-D max pooling.");
inline const LayerRegistration kAvgPool2dLayer = poolLayer<AvgPool2d>(kAvgPool2dName, "2-D average pooling.");

}  // namespace hpu::core::nn
