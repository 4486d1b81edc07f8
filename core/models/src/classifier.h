// Shared behaviour of the built-in classifiers (MLPClassifier,
// ConvNetClassifier, Sequential): a network of layers trained with
// cross-entropy, logging train_loss, val_loss/val_acc and test_loss/test_acc,
// with Adam(lr) as the default optimizer. The network reads the data's first
// field and is scored against its second: an image and its class, or (for a
// model that readsTokens) a block of token ids and the next token of each,
// the tokenizer's vocabulary being the classes.
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
  // Every layer but the last, the output layer.
  std::vector<nn::Module*> backbone() override;

 protected:
  // Appends the layers for `input` to `net`.
  virtual void build(nn::InitContext& ctx, const ModelInput& input, nn::Sequential& net) = 0;
  // Whether the network can read token ids (text data) as well as features.
  virtual bool readsTokens() const { return false; }
  // The classes its outputs score: the data's, or the tokenizer's vocabulary.
  static std::int64_t classesOf(const ModelInput& input);

 private:
  void evaluate(const Batch& batch, const char* prefix);

  std::string input_field_ = "x", label_field_ = "y";
  double lr_;
  float label_smoothing_;
  std::shared_ptr<nn::Sequential> net_;
};

}  // namespace hpu::core::models
