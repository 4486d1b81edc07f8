// MLFlowLogger's settings, and its run in MLflow's file store (see
// mlflow_file_store.cc for the layout): the logger itself when no tracking
// server is named, and where a server's run spools what the server could
// not take.
// Thread-safety: one thread at a time (the training thread, or the tracking
// server's sender while it spools).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hpu/core/config/params.h"
#include "hpu/core/loggers/logger.h"

namespace hpu::core {

// MLFlowLogger's init_args.
struct MlflowSettings {
  std::string experiment_name = "lightning_logs";
  std::string run_name;            // empty: run-<first 8 of its id>
  std::string tracking_uri;        // empty: the file store at save_dir
  std::string save_dir = "./mlruns";
  std::string prefix;
  std::string artifact_location;   // of a new experiment; empty: the store's default
  std::string run_id;              // resume this run
  std::vector<std::pair<std::string, std::string>> tags;
  std::optional<bool> synchronous;  // null: the file store appends at once, a server's sender in the background
  bool log_model = false;          // checkpoints become run artifacts
  std::string user = "unknown";    // the run's user (mlflowUser), set by setup
};
MlflowSettings mlflowSettings(const config::Params& p);

// MLflow's run states.
enum class MlflowRunStatus { kRunning, kFinished, kFailed, kKilled };
const char* mlflowStatusName(MlflowRunStatus s);  // "RUNNING", "FINISHED", ...

// One metric value as MLflow keeps it.
struct MlflowMetric {
  std::string key;
  double value;
  std::int64_t timestamp_ms;
  std::int64_t step;
};

std::int64_t nowMillis();
// The run's user, as mlflow names it: this uid's name, else USER, else "unknown".
std::string mlflowUser(const Environment& env);
// `key` with `prefix` ("<prefix>-<key>") and only the characters MLflow allows.
std::string mlflowMetricKey(const std::string& prefix, const std::string& key);
// The tags every run of ours carries beside the user's: run name, user, source.
std::vector<std::pair<std::string, std::string>> mlflowRunTags(const MlflowSettings& s, const std::string& run_name);

class MlflowFileStore final : public Logger {
 public:
  explicit MlflowFileStore(MlflowSettings settings);

  void setup(const std::string& default_root_dir, Strategy& strategy, bool continue_run,
             const Environment& env) override;
  std::string name() const override { return experiment_id_; }
  std::string version() const override { return run_id_; }
  std::string logDir() const override;
  void logHyperparams(const config::Node& hparams) override;
  void logMetrics(const std::map<std::string, double>& metrics, std::int64_t step) override;
  void logConfig(const config::Node& config) override;
  void afterSaveCheckpoint(const std::string& path) override;
  void save() override;
  void resumeAt(std::int64_t step) override;
  void finalize(bool succeeded) override;

  // For a tracking server's spool, on the process that logs: opens a run
  // of `run_id` (the server's) in the store, named and tagged as the
  // server's; then the values it could not send.
  void openSpoolRun(const std::string& run_id, std::int64_t start_time);
  void appendMetrics(const std::vector<MlflowMetric>& metrics);
  void writeParams(const std::vector<std::pair<std::string, std::string>>& params);
  void copyArtifact(const std::string& file, const std::string& artifact_dir);
  void writeConfig(const std::string& yaml);
  void endRun(MlflowRunStatus status);
  const std::string& storeDir() const { return s_.save_dir; }

 private:
  std::string runDir() const;
  std::string createRun(bool continue_run);
  std::string newestRun() const;
  void writeExperimentMeta(const std::string& id, const std::string& name, const std::string& artifact_location);
  void writeRunMeta(MlflowRunStatus status, std::optional<std::int64_t> end_time);
  void findOrCreateExperiment();

  MlflowSettings s_;
  std::string experiment_id_, run_id_;
  bool global_zero_ = true;
  std::int64_t start_time_ = 0;
  std::vector<std::string> checkpoints_;        // saved this run, for log_model at the end
  std::map<std::string, std::string> pending_;  // metric key -> lines not yet appended
};

}  // namespace hpu::core
