// Sequential: a classifier whose layers are listed in the config, each a
// registered layer (nn/layers/) with its own init_args; input sizes are
// inferred from the data, so a layer names only its outputs. On text data it
// is a language model: it reads a block of token ids and scores the next
// token at each position over the tokenizer's vocabulary.
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
#include <spdlog/fmt/ranges.h>

#include <algorithm>

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
  bool readsTokens() const override { return true; }
  void build(nn::InitContext& ctx, const ModelInput& input, nn::Sequential& net) override {
    const Shape shape = nn::buildLayers(net, layers_, ctx, input.sample_shape, "model.init_args.layers");
    // One score per class for each label of a sample: [C] for a class, [T, V] for T next tokens.
    const std::int64_t classes = classesOf(input);
    std::vector<std::int64_t> expected;
    if (input.fields.size() >= 2) expected = input.fields[1].shape;
    expected.push_back(classes);
    if (shape.dims().size() != expected.size() || !std::equal(expected.begin(), expected.end(), shape.dims().begin()))
      throw UsageError(
          fmt::format("model.init_args.layers: the last layer gives {} per sample but the data needs "
                      "[{}] ({} {}); end with {{class_path: Linear, init_args: {{out_features: {}}}}}",
                      shape.str(), fmt::join(expected, ", "), classes,
                      input.tokenizer ? "token scores per position" : "classes", classes));
  }

 private:
  std::vector<std::unique_ptr<nn::LayerRecipe>> layers_;
};

HPU_REGISTER_COMPONENT(
    LightningModule,
    ComponentSchema{
        ComponentKind::kModel,
        "Sequential",
        "",
        {"Sequential",
         "",
         {{"layers", Type::list(Type::component({ComponentKind::kLayer})), "[]",
           "The layers, in order (see the Layer classes below); input sizes are inferred."},
          {"lr", Type::real().min(0.0, true), "0.001", "Learning rate of the default Adam optimizer."},
          {"label_smoothing", Type::real().min(0.0).max(1.0), "0.0", "Label smoothing of the cross-entropy loss."}}},
        "A classifier (or, on text, a next-token model) whose layers are listed in the config."},
    [](const Params& p) { return std::make_unique<SequentialModel>(p); });

}  // namespace
}  // namespace hpu::core::models
