// MLPClassifier: Flatten -> [Linear -> activation -> Dropout] x len(hidden) -> Linear.
#include "classifier.h"
#include "hpu/core/config/registry.h"

namespace hpu::core::models {
namespace {

using config::ComponentKind;
using config::Type;

nn::ActivationKind activationFrom(const std::string& name) {
  if (name == "gelu") return nn::ActivationKind::kGELU;
  if (name == "tanh") return nn::ActivationKind::kTanh;
  if (name == "sigmoid") return nn::ActivationKind::kSigmoid;
  return nn::ActivationKind::kReLU;
}

class MLPClassifier final : public Classifier {
 public:
  explicit MLPClassifier(const config::Params& p)
      : Classifier(p.getFloat("lr"), static_cast<float>(p.getFloat("label_smoothing"))),
        hidden_(p.getIntList("hidden")),
        dropout_(static_cast<float>(p.getFloat("dropout"))),
        activation_(activationFrom(p.getString("activation"))) {}
  std::string typeName() const override { return "MLPClassifier"; }

 protected:
  void build(nn::InitContext& ctx, const ModelInput& input, nn::Sequential& net) override {
    net.append(std::make_shared<nn::Flatten>());
    std::int64_t width = input.sample_shape.numel();
    for (std::int64_t h : hidden_) {
      net.append(std::make_shared<nn::Linear>(ctx, width, h));
      net.append(std::make_shared<nn::Activation>(activation_));
      if (dropout_ > 0) net.append(std::make_shared<nn::Dropout>(dropout_, ctx.dropout_rng));
      width = h;
    }
    net.append(std::make_shared<nn::Linear>(ctx, width, input.num_classes));
  }

 private:
  std::vector<std::int64_t> hidden_;
  float dropout_;
  nn::ActivationKind activation_;
};

HPU_REGISTER_COMPONENT(
    LightningModule,
    config::ComponentSchema{
        ComponentKind::kModel,
        "MLPClassifier",
        "",
        {"MLPClassifier",
         "",
         {{"hidden", Type::list(Type::integer().min(1)), "[256, 128]", "Widths of the hidden layers."},
          {"dropout", Type::real().min(0.0).max(1.0, true), "0.2", "Dropout probability after each hidden layer."},
          {"activation", Type::string({"relu", "gelu", "tanh", "sigmoid"}), "relu", "Hidden-layer activation."},
          {"lr", Type::real().min(0.0, true), "0.001", "Learning rate of the default Adam optimizer."},
          {"label_smoothing", Type::real().min(0.0).max(1.0), "0.0", "Label smoothing of the cross-entropy loss."}}},
        "Multi-layer perceptron classifier over flattened inputs."},
    [](const config::Params& p) { return std::make_unique<MLPClassifier>(p); });

}  // namespace
}  // namespace hpu::core::models
