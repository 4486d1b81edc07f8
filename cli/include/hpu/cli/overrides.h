// Command-line config overrides, LightningCLI style:
//   --trainer.max_epochs=5   --trainer.max_epochs 5   --model MLPClassifier
//   --trainer.devices=[0,1]  --trainer.callbacks+=EarlyStopping  --ckpt_path null
// Values are read as YAML (so 5 is an int, [1,2] a list, null is null).
#pragma once

#include <string>
#include <vector>

#include "hpu/core/config/compose.h"

namespace hpu::cli {

// Parses the tokens CLI11 did not recognise, in order. Throws
// core::UsageError for a token that is not an option or lacks its value.
std::vector<core::config::Override> parseOverrides(const std::vector<std::string>& tokens);

}  // namespace hpu::cli
