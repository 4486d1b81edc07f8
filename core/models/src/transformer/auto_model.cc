// AutoModelForCausalLM: the model a config.json names by model_type, as
// transformers' Auto class builds it (from init_args pretrained, a model
// directory, or config, a config.json). Its init_args are those every causal
// LM takes; the architecture is the file's.
#include "hpu/core/base/errors.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/models/causal_lm.h"

namespace hpu::core::models {
namespace {

std::vector<config::ParamSpec> autoParams() {
  std::vector<config::ParamSpec> params{
      {"vocab_size", config::Type::optional(config::Type::integer().min(1)), "null",
       "Tokens in the vocabulary (default: config.json's)."}};
  for (auto& p : causalLMParams()) params.push_back(std::move(p));
  return params;
}

std::unique_ptr<LightningModule> makeAuto(const config::Params& p) {
  if (!p.has("pretrained") && !p.has("config"))
    p.fail("pretrained", "AutoModelForCausalLM builds the model a config.json names: give pretrained (a Hugging Face "
                         "model directory) or config (a config.json)");
  const std::string path = p.has("config") ? p.getString("config") : p.getString("pretrained");
  const std::string model_type = readModelType(path);
  const FamilyInfo* family = familyOfModelType(model_type);
  if (family == nullptr)
    throw UsageError(fmt::format("{}: model_type '{}' in {} is not a model hpu-train builds; supported: {}",
                                 p.pathOf(p.has("config") ? "config" : "pretrained"), model_type, path,
                                 supportedModelTypes()));
  return makeCausalLM(family->family, p);
}

HPU_REGISTER_COMPONENT(LightningModule,
                       config::ComponentSchema{config::ComponentKind::kModel,
                                               "AutoModelForCausalLM",
                                               "transformers",
                                               {"AutoModelForCausalLM", "", autoParams()},
                                               "The causal language model its config.json names by model_type "
                                               "(init_args pretrained or config), as transformers' Auto class."},
                       makeAuto);

}  // namespace
}  // namespace hpu::core::models
