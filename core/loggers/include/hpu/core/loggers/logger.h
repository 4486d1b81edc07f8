// Experiment loggers (Lightning's Logger API): hyper-parameters once,
// metrics as rows keyed by step. Only global rank 0 logs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hpu/core/config/node.h"
#include "hpu/env/environment.h"

namespace hpu::core {

class Strategy;

class Logger {
 public:
  virtual ~Logger() = default;
  // Resolves where logs go before anything is logged: global rank 0 picks
  // (e.g. the next version_N) and every rank learns the same directory.
  // `continue_run` (an elastic restart): the newest existing run's directory
  // instead, keeping what it logged. `env`: the process's environment, for
  // the variables a logger reads (MLflow's credentials and retries).
  virtual void setup(const std::string& default_root_dir, Strategy& strategy, bool continue_run,
                     const Environment& env) = 0;
  virtual std::string name() const = 0;
  virtual std::string version() const = 0;
  // The directory of this run's logs (config.yaml, hparams.yaml, checkpoints/).
  virtual std::string logDir() const = 0;
  virtual void logHyperparams(const config::Node& hparams) = 0;
  virtual void logMetrics(const std::map<std::string, double>& metrics, std::int64_t step) = 0;
  // The run's resolved config, once at the start of fit (LightningCLI's
  // SaveConfigCallback hands it to the loggers). Default: not logged.
  virtual void logConfig(const config::Node& config) {}
  // A checkpoint file was written (complete) at `path`, on global rank 0.
  // Loggers that keep checkpoints as artifacts (log_model) take note.
  virtual void afterSaveCheckpoint(const std::string& path) {}
  // Writes what is buffered.
  virtual void save() = 0;
  // The stage ended (`succeeded`) or failed: writes what is buffered and
  // marks the run's end where the format records it.
  virtual void finalize(bool succeeded) { save(); }
  // Training resumed after `step` optimizer steps: forget rows logged at
  // later steps (the work being redone logs them again).
  virtual void resumeAt(std::int64_t step) = 0;
};

// The loggers that `trainer.logger: true` and `null` (Lightning's default)
// build, as registered class names, in order (the first one's directory is
// the run's log_dir): Lightning's default with TensorBoard installed, and
// the CSV file every tool reads. Both share version_N. The one place that
// says which.
const std::vector<std::string>& defaultLoggerClasses();

}  // namespace hpu::core
