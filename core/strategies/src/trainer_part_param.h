// Init args that lightning-habana's strategies share. Those the Trainer
// fills in (accelerator, checkpoint_io, precision_plugin, parallel_devices,
// ...): print_config writes them as null, so a strategy accepts them as null
// and takes the part from the Trainer's own keys.
#pragma once

#include <string>

#include "hpu/core/config/schema.h"

namespace hpu::core {

// `name`, null only; another value is refused, naming where that part is set.
inline config::ParamSpec trainerPartParam(const char* name, const std::string& set_by) {
  return {name, config::Type::optional(config::Type::anyOf({config::Type::string(), config::Type::dict()})), "null",
          "Set by the Trainer from " + set_by + ".", "the Trainer builds it from " + set_by + "; leave it null"};
}

// cluster_environment: a ClusterEnvironment's name, forced instead of detected.
inline config::ParamSpec clusterEnvironmentParam() {
  return {"cluster_environment",
          config::Type::optional(config::Type::string(
              {"LightningEnvironment", "SLURMEnvironment", "MPIEnvironment", "TorchElasticEnvironment"})),
          "null", "Force a cluster environment instead of detecting it (see trainer.plugins too)."};
}

}  // namespace hpu::core
