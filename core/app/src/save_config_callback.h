// LightningCLI's SaveConfigCallback: at the start of fit, global rank 0
// writes the resolved config to <log_dir>/config.yaml, refusing to replace
// the config of an earlier run unless told to (--save_config_overwrite).
#pragma once

#include <memory>

#include "hpu/core/callbacks/callback.h"
#include "hpu/core/config/node.h"

namespace hpu::core::app {

std::unique_ptr<Callback> makeSaveConfigCallback(config::Node config, bool overwrite);

}  // namespace hpu::core::app
