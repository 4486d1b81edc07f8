// Shared behaviour of the built-in classifiers (MLPClassifier,
// ConvNetClassifier, Sequential): a network of layers trained with
// cross-entropy, logging train_loss, val_loss/val_acc and test_loss/test_acc,
// with Adam(lr) as the default optimizer.
#pragma once

#include <memory>

#include "hpu/core/module/lightning_module.h"
#include "hpu/core/nn/layers.h"
#include "hpu/core/nn/sequential.h"

namespace hpu::core::models {

class Classifier : public LightningModule {
 public:
  Classifier(double lr, float label_smoothing) : lr_(lr), label_smoothing_(label_smoothing) {}

  void configureModel(nn::InitContext& ctx, const ModelInput& input) final;
  Tensor forward(const Tensor& x) override { return (*net_)(x); }
  Tensor trainingStep(const Batch& batch, std::int64_t batch_idx) override;
  void validationStep(const Batch& batch, std::int64_t batch_idx) override;
  void testStep(const Batch& batch, std::int64_t batch_idx) override;
  OptimizerConfig configureOptimizers() override;

 protected:
  // Appends the layers for `input` to `net`.
  virtual void build(nn::InitContext& ctx, const ModelInput& input, nn::Sequential& net) = 0;

 private:
  void evaluate(const Batch& batch, const char* prefix);

  double lr_;
  float label_smoothing_;
  std::shared_ptr<nn::Sequential> net_;
};

// Requires labelled data with classes; throws UsageError naming the model.
void requireClasses(const std::string& model, const ModelInput& input);

}  // namespace hpu::core::models
