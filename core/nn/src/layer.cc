#include "hpu/core/nn/layer.h"

#include "hpu/core/base/errors.h"
#include "hpu/core/nn/sequential.h"

namespace hpu::core::nn {

LayerRecipe::LayerRecipe(const config::Params& init_args, LayerBuilder build)
    : schema_(&init_args.schema()), values_(init_args.values()), path_(init_args.path()), build_(std::move(build)) {}

LayerBuild LayerRecipe::build(InitContext& ctx, const Shape& in, const std::string& where) const {
  return build_(config::Params(*schema_, values_, path_), ctx, in, where);
}

config::ComponentSchema layerSchema(const char* name, std::vector<config::ParamSpec> params, const char* doc,
                                    std::string module) {
  return config::ComponentSchema{
      config::ComponentKind::kLayer, name, std::move(module), {name, "", std::move(params)}, doc};
}

config::ComponentSchema torchLayerSchema(const char* name, std::vector<config::ParamSpec> params, const char* doc) {
  return layerSchema(name, std::move(params), doc, "torch.nn");
}

LayerRegistration::LayerRegistration(config::ComponentSchema schema, LayerBuilder build) {
  config::ComponentRegistration<LayerRecipe>(std::move(schema), [build = std::move(build)](const config::Params& p) {
    return std::make_unique<LayerRecipe>(p, build);
  });
}

void layerMisfit(const std::string& where, const std::string& why) { throw UsageError(where + ": " + why); }

std::vector<std::unique_ptr<LayerRecipe>> listedLayers(const config::Params& init_args) {
  const config::Node& layers = init_args.node("layers");
  if (layers.items().empty()) init_args.fail("layers", "lists no layers");
  const std::string path = init_args.pathOf("layers");
  std::vector<std::unique_ptr<LayerRecipe>> recipes;
  for (std::size_t i = 0; i < layers.items().size(); ++i)
    recipes.push_back(config::ComponentFactory<LayerRecipe>::instance().create(layers.items()[i],
                                                                               path + "[" + std::to_string(i) + "]"));
  return recipes;
}

Shape buildLayers(Sequential& block, const std::vector<std::unique_ptr<LayerRecipe>>& recipes, InitContext& ctx,
                  const Shape& in, const std::string& path) {
  Shape shape = in;
  for (std::size_t i = 0; i < recipes.size(); ++i) {
    LayerBuild built = recipes[i]->build(ctx, shape, path + "[" + std::to_string(i) + "]");
    block.append(std::move(built.module));
    shape = built.out;
  }
  return shape;
}

}  // namespace hpu::core::nn
