#include "hpu/core/app/export.h"

#include <spdlog/spdlog.h>

#include "hpu/core/base/errors.h"
#include "hpu/core/models/causal_lm.h"

namespace hpu::core {

int runExport(ExportRequest request) {
  // One process on one device: the weights are the same whatever layout
  // trained them, and export draws nothing.
  config::Node& options = *request.run.config.find("trainer");
  for (const auto& [key, value] : {std::pair{"devices", "1"}, std::pair{"num_nodes", "1"}, std::pair{"strategy", "auto"}})
    *options.find(key) = config::Node::scalar(value, options.find(key)->loc());
  request.run.subcommand = "predict";
  device::Platform platform = device::Platform::fromEnv(request.run.env);
  Pipeline pipeline = buildPipeline(request.run, platform, -1);
  auto* model = dynamic_cast<models::CausalLM*>(pipeline.model.get());
  if (model == nullptr)
    throw UsageError("export writes Hugging Face directories of LlamaForCausalLM and GPT2LMHeadModel; the "
                     "checkpoint's model is a " + pipeline.model->typeName());
  Trainer trainer(std::move(pipeline.parts));
  trainer.loadWeights(*model, *pipeline.data, request.ckpt_path);
  if (request.adapter)
    model->saveAdapter(request.output);
  else
    model->exportPretrained(request.output);
  spdlog::info("export: wrote {} ({})", request.output,
               request.adapter ? "a PEFT adapter directory" : "a Hugging Face model directory");
  return 0;
}

}  // namespace hpu::core
