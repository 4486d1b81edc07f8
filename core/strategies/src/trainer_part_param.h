// Init args of lightning-habana's strategies that the Trainer fills in
// (accelerator, checkpoint_io, precision_plugin, parallel_devices, ...):
// print_config writes them as null, so a strategy accepts them as null and
// takes the part from the Trainer's own keys.
#pragma once

#include <string>

#include "hpu/core/config/schema.h"

namespace hpu::core {

// `name`, null only; another value is refused, naming where that part is set.
inline config::ParamSpec trainerPartParam(const char* name, const std::string& set_by) {
  return {name, config::Type::optional(config::Type::anyOf({config::Type::string(), config::Type::dict()})), "null",
          "Set by the Trainer from " + set_by + ".", "the Trainer builds it from " + set_by + "; leave it null"};
}

}  // namespace hpu::core
