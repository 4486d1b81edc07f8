// Experiment loggers (Lightning's Logger API): hyper-parameters once,
// metrics as rows keyed by step. Only global rank 0 logs.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "hpu/core/config/node.h"

namespace hpu::core {

class Strategy;

class Logger {
 public:
  virtual ~Logger() = default;
  // Resolves where logs go before anything is logged: global rank 0 picks
  // (e.g. the next version_N) and every rank learns the same directory.
  // `continue_run` (an elastic restart): the newest existing run's directory
  // instead, keeping what it logged.
  virtual void setup(const std::string& default_root_dir, Strategy& strategy, bool continue_run) = 0;
  virtual std::string name() const = 0;
  virtual std::string version() const = 0;
  // The directory of this run's logs (config.yaml, hparams.yaml, checkpoints/).
  virtual std::string logDir() const = 0;
  virtual void logHyperparams(const config::Node& hparams) = 0;
  virtual void logMetrics(const std::map<std::string, double>& metrics, std::int64_t step) = 0;
  // Writes what is buffered.
  virtual void save() = 0;
  // Training resumed after `step` optimizer steps: forget rows logged at
  // later steps (the work being redone logs them again).
  virtual void resumeAt(std::int64_t step) = 0;
};

}  // namespace hpu::core
