// ConvNetClassifier: [Conv2d -> MaxPool2d(2) -> ReLU] x len(channels) ->
// Flatten -> Linear(hidden) -> ReLU -> Dropout -> Linear(classes).
//
// Each block pools before its ReLU: the two commute (the max of ReLUs is
// the ReLU of the max), so this is the usual conv-relu-pool block, values and
// gradients alike (where a window's maximum is <= 0 both give it gradient 0;
// elsewhere both route it to the same arg-max), with the ReLU and its
// backward on a quarter of the elements.
#include "classifier.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/config/registry.h"

namespace hpu::core::models {
namespace {

using config::ComponentKind;
using config::Type;

class ConvNetClassifier final : public Classifier {
 public:
  explicit ConvNetClassifier(const config::Params& p)
      : Classifier(p.getFloat("lr"), static_cast<float>(p.getFloat("label_smoothing"))),
        channels_(p.getIntList("channels")),
        kernel_(p.getInt("kernel_size")),
        hidden_(p.getInt("hidden")),
        dropout_(static_cast<float>(p.getFloat("dropout"))) {}
  std::string typeName() const override { return "ConvNetClassifier"; }

 protected:
  void build(nn::InitContext& ctx, const ModelInput& input, nn::Sequential& net) override {
    if (input.sample_shape.ndim() != 3)
      throw UsageError("ConvNetClassifier needs image samples [channels, height, width]; the data has " +
                       input.sample_shape.str());
    std::int64_t c = input.sample_shape[0], h = input.sample_shape[1], w = input.sample_shape[2];
    for (std::int64_t out : channels_) {
      net.append(std::make_shared<nn::Conv2d>(ctx, c, out, kernel_, 1, kernel_ / 2));
      net.append(std::make_shared<nn::MaxPool2d>(ops::Pool2dOptions{2, 2, 0}));
      net.append(std::make_shared<nn::Activation>(nn::ActivationKind::kReLU));
      c = out;
      h /= 2;
      w /= 2;
      if (h == 0 || w == 0)
        throw UsageError("ConvNetClassifier: " + std::to_string(channels_.size()) + " conv blocks pool a " +
                         input.sample_shape.str() + " image to nothing; use fewer channels");
    }
    net.append(std::make_shared<nn::Flatten>());
    net.append(std::make_shared<nn::Linear>(ctx, c * h * w, hidden_));
    net.append(std::make_shared<nn::Activation>(nn::ActivationKind::kReLU));
    if (dropout_ > 0) net.append(std::make_shared<nn::Dropout>(dropout_, ctx.dropout_rng));
    net.append(std::make_shared<nn::Linear>(ctx, hidden_, input.num_classes));
  }

 private:
  std::vector<std::int64_t> channels_;
  std::int64_t kernel_;
  std::int64_t hidden_;
  float dropout_;
};

HPU_REGISTER_COMPONENT(
    LightningModule,
    config::ComponentSchema{
        ComponentKind::kModel,
        "ConvNetClassifier",
        "",
        {"ConvNetClassifier",
         "",
         {{"channels", Type::list(Type::integer().min(1)), "[32, 64]", "Output channels of each conv block."},
          {"kernel_size", Type::integer().min(1), "3", "Square kernel size of the convolutions ('same' padding)."},
          {"hidden", Type::integer().min(1), "128", "Width of the hidden fully connected layer."},
          {"dropout", Type::real().min(0.0).max(1.0, true), "0.25", "Dropout before the output layer."},
          {"lr", Type::real().min(0.0, true), "0.001", "Learning rate of the default Adam optimizer."},
          {"label_smoothing", Type::real().min(0.0).max(1.0), "0.0", "Label smoothing of the cross-entropy loss."}}},
        "A small CNN: conv-maxpool-relu blocks and two fully connected layers."},
    [](const config::Params& p) { return std::make_unique<ConvNetClassifier>(p); });

}  // namespace
}  // namespace hpu::core::models
