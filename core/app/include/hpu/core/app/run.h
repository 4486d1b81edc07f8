// Entry points the CLI calls once a config is resolved.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "hpu/core/config/node.h"
#include "hpu/core/trainer/trainer.h"
#include "hpu/device/platform.h"
#include "hpu/env/environment.h"

namespace hpu::core {

struct RunRequest {
  std::string subcommand;  // fit, validate, test, predict
  config::Node config;     // canonical (see config/normalize.h); seed_everything as given
  bool save_config_overwrite = false;
  std::vector<std::string> argv;  // the command line, for spawning local workers
  Environment env;
  std::string version;  // the program version (compared across ranks)
  // What the config's composition rewrote (GPU spellings mapped to HPU
  // ones), warned about once, by global rank 0.
  std::vector<std::string> notes;
};

// seed_everything: true becomes a concrete random seed (PL_GLOBAL_SEED's
// when set), so that a printed config reproduces a run. A run resolves it
// itself, once for the whole job (buildPipeline): rank 0's seed.
void resolveSeed(config::Node& config, const Environment& env);

// Builds the pipeline from the registry and runs the subcommand. Returns the
// exit code; throws core::Error (or a device/comm error) on failure.
int run(const RunRequest& request);

// What a config builds before the Trainer: its parts (strategy set up on
// `platform`, precision, optimizer and scheduler from the config; no
// callbacks, loggers or profiler yet), the model and the data module.
struct Pipeline {
  TrainerParts parts;
  std::unique_ptr<LightningModule> model;
  std::unique_ptr<data::DataModule> data;
  int devices = 1;  // per node
};
// `simulated_rank` >= 0: the strategy traces that rank of the job alone
// (RunEnvironment::simulated_rank).
Pipeline buildPipeline(const RunRequest& request, device::Platform& platform, int simulated_rank);

// The `hpu-train devices` table for this environment.
std::string describeDevices(const Environment& env);

}  // namespace hpu::core
