// Sequential: a classifier whose layers are listed in the config, each a
// registered layer (nn/layers/) with its own init_args; input sizes are
// inferred from the data, so a layer names only its outputs:
//   model:
//     class_path: Sequential
//     init_args:
//       layers:
//         - {class_path: Conv2d, init_args: {out_channels: 16, kernel_size: 3, padding: 1}}
//         - ReLU
//         - {class_path: MaxPool2d, init_args: {kernel_size: 2}}
//         - Flatten
//         - {class_path: Linear, init_args: {out_features: 10}}
#include <spdlog/fmt/fmt.h>

#include "classifier.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/nn/layers.h"

namespace hpu::core::models {
namespace {

using config::ComponentKind;
using config::ComponentSchema;
using config::Params;
using config::Type;

class SequentialModel final : public Classifier {
 public:
  explicit SequentialModel(const Params& p)
      : Classifier(p.getFloat("lr"), static_cast<float>(p.getFloat("label_smoothing"))), layers_(nn::listedLayers(p)) {}
  std::string typeName() const override { return "Sequential"; }

 protected:
  void build(nn::InitContext& ctx, const ModelInput& input, nn::Sequential& net) override {
    const Shape shape = nn::buildLayers(net, layers_, ctx, input.sample_shape, "model.init_args.layers");
    if (shape.ndim() != 1 || shape[0] != input.num_classes)
      throw UsageError(fmt::format("model.init_args.layers: the last layer gives {} per sample but the data has {} "
                                   "classes; end with {{class_path: Linear, init_args: {{out_features: {}}}}}",
                                   shape.str(), input.num_classes, input.num_classes));
  }

 private:
  std::vector<std::unique_ptr<nn::LayerRecipe>> layers_;
};

HPU_REGISTER_COMPONENT(
    LightningModule,
    ComponentSchema{ComponentKind::kModel,
                    "Sequential",
                    {},
                    {"Sequential",
                     "",
                     {{"layers", Type::list(Type::component({ComponentKind::kLayer})), "[]",
                       "The layers, in order (see the Layer classes below); input sizes are inferred."},
                      {"lr", Type::real().min(0.0, true), "0.001", "Learning rate of the default Adam optimizer."},
                      {"label_smoothing", Type::real().min(0.0).max(1.0), "0.0", "Label smoothing of the cross-entropy loss."}}},
                    "A classifier whose layers are listed in the config."},
    [](const Params& p) { return std::make_unique<SequentialModel>(p); });

}  // namespace
}  // namespace hpu::core::models
