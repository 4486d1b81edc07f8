// The schema of a whole hpu-train config, as LightningCLI lays it out:
//   seed_everything, trainer, model, data, optimizer, lr_scheduler, ckpt_path
#pragma once

#include "hpu/core/config/schema.h"

namespace hpu::core::config {

const StructSchema& trainerSchema();
const StructSchema& rootSchema();
const Type& rootType();

// Strategy and accelerator names accepted as plain strings (Lightning's
// registry names), beside their class paths.
const std::vector<std::string>& strategyNames();
const std::vector<std::string>& acceleratorNames();
const std::vector<std::string>& precisionNames();

}  // namespace hpu::core::config
