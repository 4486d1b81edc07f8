#include "classifier.h"

#include "hpu/core/base/errors.h"

namespace hpu::core::models {

void requireClasses(const std::string& model, const ModelInput& input) {
  if (input.num_classes < 2)
    throw UsageError(model + " is a classifier but the data has no class labels; choose a labelled data module "
                             "(FashionMNISTDataModule, MNISTDataModule, CSVDataModule)");
}

void Classifier::configureModel(nn::InitContext& ctx, const ModelInput& input) {
  requireClasses(typeName(), input);
  net_ = registerModule("net", std::make_shared<nn::Sequential>());
  build(ctx, input, *net_);
}

Tensor Classifier::trainingStep(const Batch& batch, std::int64_t) {
  Tensor loss = ops::crossEntropy(forward(batch["x"]), batch["y"], label_smoothing_);
  log("train_loss", loss, {.prog_bar = true});
  return loss;
}

void Classifier::evaluate(const Batch& batch, const char* prefix) {
  Tensor logits = forward(batch["x"]);
  Tensor loss = ops::crossEntropy(logits, batch["y"], label_smoothing_);
  const double acc = static_cast<double>(ops::countCorrect(logits, batch["y"])) / static_cast<double>(batch.size());
  log(std::string(prefix) + "_loss", loss, {.prog_bar = true});
  log(std::string(prefix) + "_acc", acc, {.prog_bar = true});
}

void Classifier::validationStep(const Batch& batch, std::int64_t) { evaluate(batch, "val"); }
void Classifier::testStep(const Batch& batch, std::int64_t) { evaluate(batch, "test"); }

OptimizerConfig Classifier::configureOptimizers() {
  optim::AdamOptions o;
  o.lr = lr_;
  return {optim::makeAdam(o), nullptr};
}

}  // namespace hpu::core::models
