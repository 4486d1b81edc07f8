// The Trainer's settings, read from a canonical trainer config node (see
// config/root.h for the keys and their documentation).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "hpu/core/config/node.h"

namespace hpu::core {

// limit_*_batches / val_check_interval: a count (int) or a fraction (float).
struct BatchLimit {
  bool is_fraction = true;
  double fraction = 1.0;
  std::int64_t count = 0;

  // How many of `available` batches to run.
  std::int64_t of(std::int64_t available) const;
  static BatchLimit parse(const config::Node& n);  // null = all
};

// A duration as Lightning's max_time and Timer take it: "DD:HH:MM:SS" or a
// mapping of weeks, days, hours, minutes, seconds, milliseconds. Throws
// ConfigError naming `key_path` and the node's location.
std::chrono::milliseconds parseDuration(const config::Node& n, const std::string& key_path);

struct TrainerOptions {
  config::Node accelerator, strategy, devices, logger, callbacks, profiler, plugins;
  std::int64_t num_nodes = 1;
  std::string precision = "32-true";
  std::int64_t fast_dev_run = 0;  // batches per stage, 0: off
  std::int64_t max_epochs = 1000; // -1: unlimited
  std::int64_t min_epochs = 0;
  std::int64_t max_steps = -1;
  std::int64_t min_steps = 0;
  std::optional<std::chrono::milliseconds> max_time;
  BatchLimit limit_train, limit_val, limit_test, limit_predict;
  BatchLimit val_check_interval;
  std::optional<std::int64_t> check_val_every_n_epoch = 1;
  std::int64_t num_sanity_val_steps = 2;  // -1: all
  std::int64_t log_every_n_steps = 50;
  bool enable_checkpointing = true;
  bool enable_progress_bar = true;
  bool enable_model_summary = true;
  std::int64_t accumulate_grad_batches = 1;
  std::optional<double> gradient_clip_val;
  bool clip_by_value = false;  // gradient_clip_algorithm: value (else norm)
  bool use_distributed_sampler = true;
  std::string default_root_dir = ".";
  // overfit_batches: when set, the train and val limits, with the training
  // set in order (no shuffling).
  std::optional<BatchLimit> overfit;
  std::int64_t reload_dataloaders_every_n_epochs = 0;  // 0: never
  bool detect_anomaly = false;
  bool sync_batchnorm = false;
  // barebones: no loggers, checkpointing, progress bar, model summary or
  // sanity check (parse() refuses a config that asks for one).
  bool barebones = false;
  // dry_run: the launch alone, on shape-only devices (app/launch_dry_run.h).
  bool dry_run = false;

  // REQUIRES: `trainer` is canonical. Throws ConfigError for values whose
  // meaning is wrong in combination (e.g. an unparseable max_time).
  static TrainerOptions parse(const config::Node& trainer);
};

}  // namespace hpu::core
