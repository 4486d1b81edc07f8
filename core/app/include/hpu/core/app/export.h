// `hpu-train export`: a checkpoint of a language model as a Hugging Face
// model directory (transformers' from_pretrained loads it), or its LoRA
// adapters as a PEFT adapter directory (PeftModel.from_pretrained loads it).
#pragma once

#include <string>

#include "hpu/core/app/run.h"

namespace hpu::core {

struct ExportRequest {
  RunRequest run;         // the config that built the checkpoint's model
  std::string ckpt_path;  // the checkpoint file
  std::string output;     // the directory to write
  bool adapter = false;   // the LoRA adapters alone, in PEFT's layout
};

// Builds the model on one emulated device (whatever devices, strategy and
// loggers the config names), loads the checkpoint's weights and writes the
// directory. Returns 0; throws UsageError for a model that is not a causal
// language model, or (adapter) one without LoRA.
int runExport(ExportRequest request);

}  // namespace hpu::core
