// How a layer joins YAML: a layer class registers itself once, in its own
// header under nn/layers/, with its init_args (one schema, which drives
// validation, --help and --print_config) and how it is built for inputs of a
// known sample shape. A YAML Sequential (models/) lists layers by class path;
// each layer names only its outputs, its input size comes from the layer
// before it.
//
//   inline const LayerRegistration kReLULayer{
//       torchLayerSchema("ReLU", {}, "max(0, x)."),
//       [](const config::Params&, InitContext&, const Shape& in, const std::string&) {
//         return LayerBuild{std::make_shared<Activation>(ActivationKind::kReLU), in};
//       }};
//
// The registry is filled at static initialisation (every header under
// nn/layers/ is compiled into the library) and read-only afterwards.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hpu/core/config/params.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/nn/module.h"

namespace hpu::core::nn {

class Sequential;

// A built layer and the shape of one sample of its output.
struct LayerBuild {
  std::shared_ptr<Module> module;
  Shape out;
};

// Builds a layer from its validated init_args for samples of shape `in`
// (no batch dimension). `where` names the layer in the config
// ("model.init_args.layers[2]") for layerMisfit.
using LayerBuilder = std::function<LayerBuild(const config::Params& init_args, InitContext& ctx, const Shape& in,
                                              const std::string& where)>;

// A layer from a config, its init_args bound, waiting for its input shape.
class LayerRecipe {
 public:
  LayerRecipe(const config::Params& init_args, LayerBuilder build);
  LayerBuild build(InitContext& ctx, const Shape& in, const std::string& where) const;

 private:
  const config::StructSchema* schema_;
  config::Node values_;
  std::string path_;
  LayerBuilder build_;
};

// The schema of a layer class, with the Python module that has a class of
// that name ("" if none does; see ComponentSchema).
config::ComponentSchema layerSchema(const char* name, std::vector<config::ParamSpec> params, const char* doc,
                                    std::string module = "");
// The schema of a layer torch.nn has: "torch.nn.<name>" is its class path.
config::ComponentSchema torchLayerSchema(const char* name, std::vector<config::ParamSpec> params, const char* doc);

// Registers a layer class at static initialisation (an inline variable in
// its header).
struct LayerRegistration {
  LayerRegistration(config::ComponentSchema schema, LayerBuilder build);
};

// Output size of a window sweep (convolution, pooling) over `size`; 0 when
// the kernel exceeds the padded input (checked first: integer division
// truncates toward zero).
inline std::int64_t sweptSize(std::int64_t size, std::int64_t kernel, std::int64_t stride, std::int64_t padding) {
  return size + 2 * padding < kernel ? 0 : (size + 2 * padding - kernel) / stride + 1;
}

// Throws UsageError "<where>: <why>": the input shape does not fit the layer.
[[noreturn]] void layerMisfit(const std::string& where, const std::string& why);

// The recipes of the init_args' "layers" list. Throws ConfigError naming it
// when it lists no layers.
std::vector<std::unique_ptr<LayerRecipe>> listedLayers(const config::Params& init_args);
// Builds the recipes into `block` in order, each for the output of the one
// before; returns the last output shape. Layer i is named "<path>[i]".
Shape buildLayers(Sequential& block, const std::vector<std::unique_ptr<LayerRecipe>>& recipes, InitContext& ctx,
                  const Shape& in, const std::string& path);

}  // namespace hpu::core::nn
