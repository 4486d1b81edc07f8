// MLflow's tracking server through its REST API (/api/2.0/mlflow/...) and
// its artifact proxy (/api/2.0/mlflow-artifacts/...), as mlflow's own
// client calls them. Authentication, TLS and the retry policy come from
// mlflow's environment variables (mlflowHttpOptions, MlflowRetry).
// Every call throws MlflowError; none retries by itself.
// Thread-safety: calls may come from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "http_client.h"
#include "hpu/core/base/errors.h"
#include "mlflow_file_store.h"

namespace hpu::core {

// A call that failed: no answer (`reached` false), or the server's error.
class MlflowError : public Error {
 public:
  MlflowError(std::string message, bool reached, bool retryable)
      : Error(std::move(message)), reached_(reached), retryable_(retryable) {}
  bool reached() const { return reached_; }
  // Worth trying again: no answer, or 429 / 5xx.
  bool retryable() const { return retryable_; }

 private:
  bool reached_, retryable_;
};

// mlflow's HTTP settings: MLFLOW_TRACKING_TOKEN (bearer) or
// MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD (basic),
// MLFLOW_TRACKING_INSECURE_TLS, MLFLOW_TRACKING_SERVER_CERT_PATH,
// MLFLOW_HTTP_REQUEST_TIMEOUT (seconds, 120).
HttpOptions mlflowHttpOptions(const Environment& env);

// mlflow's retry policy: MLFLOW_HTTP_REQUEST_MAX_RETRIES (7) tries after the
// first, waiting MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR (2) s x 2^(n-1) before
// try n, at most 120 s, plus up to MLFLOW_HTTP_REQUEST_BACKOFF_JITTER (1) s.
struct MlflowRetry {
  int max_retries = 7;
  double backoff_factor = 2;
  double jitter = 1;
  std::chrono::milliseconds delayBefore(int retry) const;  // retry >= 1
  static MlflowRetry fromEnv(const Environment& env);
};

struct MlflowRunInfo {
  std::string run_id, experiment_id, run_name, artifact_uri;
  std::int64_t start_time = 0;
};

class MlflowTracking {
 public:
  // `uri`: http://HOST:PORT[/prefix] or https://...
  MlflowTracking(std::string uri, HttpOptions options);
  const std::string& uri() const { return uri_; }

  // The experiment's id, or nothing if the server has none of that name.
  std::optional<std::string> experimentIdByName(const std::string& name) const;
  std::string createExperiment(const std::string& name, const std::string& artifact_location) const;
  MlflowRunInfo createRun(const std::string& experiment_id, const std::string& run_name, const std::string& user,
                          std::int64_t start_time, const std::vector<std::pair<std::string, std::string>>& tags) const;
  MlflowRunInfo getRun(const std::string& run_id) const;
  // The experiment's run that started last, if it has one.
  std::optional<MlflowRunInfo> newestRun(const std::string& experiment_id) const;
  // One log-batch request: at most 1000 metrics, 100 params, 100 tags.
  void logBatch(const std::string& run_id, const std::vector<MlflowMetric>& metrics,
                const std::vector<std::pair<std::string, std::string>>& params) const;
  void updateRun(const std::string& run_id, MlflowRunStatus status, std::int64_t end_time) const;
  // Uploads `file` as <artifact_dir>/<its name> of the run, through the
  // artifact proxy (an artifact_uri of mlflow-artifacts:/...).
  void uploadArtifact(const MlflowRunInfo& run, const std::string& artifact_dir, const std::string& file) const;
  // Uploads `text` as the run's artifact `name`.
  void uploadText(const MlflowRunInfo& run, const std::string& name, const std::string& text) const;

 private:
  std::string call(const char* method, const std::string& path, const std::string& body) const;
  MlflowError failure(const HttpResponse& r, const std::string& what) const;
  // The artifact proxy's URL of `path` in the run's artifacts.
  std::string artifactUrl(const MlflowRunInfo& run, const std::string& path) const;

  std::string uri_;
  HttpClient http_;
};

}  // namespace hpu::core
