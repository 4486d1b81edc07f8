// The schema of a whole hpu-train config, as LightningCLI lays it out:
//   seed_everything, trainer, model, data, optimizer, lr_scheduler, ckpt_path
#pragma once

#include "hpu/core/config/schema.h"

namespace hpu::core::config {

const StructSchema& trainerSchema();
const StructSchema& rootSchema();
const Type& rootType();

// Accelerator names accepted as plain strings, beside the class paths.
// (Strategy and precision names have their tables beside the strategies and
// the precision plugins.)
const std::vector<std::string>& acceleratorNames();

}  // namespace hpu::core::config
