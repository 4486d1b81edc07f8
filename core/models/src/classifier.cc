#include "classifier.h"

#include "hpu/core/base/errors.h"
#include "hpu/core/data/tokenizer.h"

namespace hpu::core::models {

namespace {

// Requires labelled data with classes; throws UsageError naming the model.
void requireClasses(const std::string& model, const ModelInput& input) {
  if (input.num_classes < 2 && input.tokenizer)
    throw UsageError(model +
                     " is a classifier and the data is text; choose a language model (LlamaForCausalLM, "
                     "GPT2LMHeadModel) or a Sequential of layers");
  if (input.num_classes < 2)
    throw UsageError(model +
                     " is a classifier but the data has no class labels; choose a labelled data module "
                     "(FashionMNISTDataModule, MNISTDataModule, CSVDataModule)");
}

}  // namespace

std::int64_t Classifier::classesOf(const ModelInput& input) {
  return input.tokenizer ? input.tokenizer->vocabSize() : input.num_classes;
}

void Classifier::configureModel(nn::InitContext& ctx, const ModelInput& input) {
  if (!(input.tokenizer && readsTokens())) requireClasses(typeName(), input);
  if (input.fields.size() >= 2) {
    input_field_ = input.fields[0].name;
    label_field_ = input.fields[1].name;
  }
  net_ = registerModule("net", std::make_shared<nn::Sequential>());
  build(ctx, input, *net_);
}

Tensor Classifier::trainingStep(const Batch& batch, std::int64_t) {
  Tensor loss = ops::crossEntropy(forward(batch[input_field_]), batch[label_field_], label_smoothing_);
  log("train_loss", loss, {.prog_bar = true});
  return loss;
}

void Classifier::evaluate(const Batch& batch, const char* prefix) {
  const Tensor& labels = batch[label_field_];
  Tensor logits = forward(batch[input_field_]);
  Tensor loss = ops::crossEntropy(logits, labels, label_smoothing_);
  const double acc = static_cast<double>(ops::countCorrect(logits, labels)) / static_cast<double>(labels.numel());
  log(std::string(prefix) + "_loss", loss, {.prog_bar = true});
  log(std::string(prefix) + "_acc", acc, {.prog_bar = true});
}

void Classifier::validationStep(const Batch& batch, std::int64_t) { evaluate(batch, "val"); }
void Classifier::testStep(const Batch& batch, std::int64_t) { evaluate(batch, "test"); }

std::vector<nn::Module*> Classifier::backbone() {
  std::vector<nn::Module*> layers;
  for (std::size_t i = 0; i + 1 < net_->size(); ++i) layers.push_back(net_->children()[i].second.get());
  return layers;
}

OptimizerConfig Classifier::configureOptimizers() {
  optim::AdamOptions o;
  o.lr = lr_;
  return {optim::makeAdam(o), nullptr};
}

}  // namespace hpu::core::models
