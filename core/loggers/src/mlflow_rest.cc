#include "mlflow_rest.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

namespace hpu::core {
namespace {

using nlohmann::json;

double envNumber(const Environment& env, const char* name, double fallback) {
  const std::string v = env.get(name).value_or("");
  if (v.empty()) return fallback;
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || !std::isfinite(x) || x < 0)
    throw UsageError(fmt::format("{}={}: not a number >= 0", name, v));
  return x;
}

bool envTrue(const Environment& env, const char* name) {
  std::string v = env.get(name).value_or("");
  std::transform(v.begin(), v.end(), v.begin(), ::tolower);
  return v == "true" || v == "1";
}

// A metric value in protobuf's JSON: non-finite values as strings.
json metricValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

json keyValues(const std::vector<std::pair<std::string, std::string>>& pairs) {
  json out = json::array();
  for (const auto& [k, v] : pairs) out.push_back({{"key", k}, {"value", v}});
  return out;
}

MlflowRunInfo runInfo(const json& run) {
  const json& info = run.at("info");
  MlflowRunInfo r;
  r.run_id = info.at("run_id");
  r.experiment_id = info.at("experiment_id");
  r.run_name = info.value("run_name", "");
  r.artifact_uri = info.value("artifact_uri", "");
  r.start_time = info.value("start_time", std::int64_t{0});
  return r;
}

}  // namespace

HttpOptions mlflowHttpOptions(const Environment& env) {
  HttpOptions o;
  o.bearer_token = env.get("MLFLOW_TRACKING_TOKEN").value_or("");
  o.username = env.get("MLFLOW_TRACKING_USERNAME").value_or("");
  o.password = env.get("MLFLOW_TRACKING_PASSWORD").value_or("");
  o.verify_tls = !envTrue(env, "MLFLOW_TRACKING_INSECURE_TLS");
  o.ca_bundle = env.get("MLFLOW_TRACKING_SERVER_CERT_PATH").value_or("");
  o.timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(envNumber(env, "MLFLOW_HTTP_REQUEST_TIMEOUT", 120) * 1000));
  o.connect_timeout = std::min(o.timeout, o.connect_timeout);
  return o;
}

MlflowRetry MlflowRetry::fromEnv(const Environment& env) {
  MlflowRetry r;
  r.max_retries = static_cast<int>(envNumber(env, "MLFLOW_HTTP_REQUEST_MAX_RETRIES", r.max_retries));
  r.backoff_factor = envNumber(env, "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", r.backoff_factor);
  r.jitter = envNumber(env, "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER", r.jitter);
  return r;
}

std::chrono::milliseconds MlflowRetry::delayBefore(int retry) const {
  static thread_local std::mt19937 random(std::random_device{}());
  const double base = std::min(120.0, backoff_factor * std::pow(2.0, retry - 1));
  const double extra = jitter > 0 ? std::uniform_real_distribution<double>(0, jitter)(random) : 0;
  return std::chrono::milliseconds(static_cast<std::int64_t>((base + extra) * 1000));
}

MlflowTracking::MlflowTracking(std::string uri, HttpOptions options)
    : uri_(std::move(uri)), http_(std::move(options)) {
  while (!uri_.empty() && uri_.back() == '/') uri_.pop_back();
}

MlflowError MlflowTracking::failure(const HttpResponse& r, const std::string& what) const {
  if (r.tls_failed)
    return MlflowError(fmt::format("MLflow tracking server {} ({}): TLS failed: {}; trust the server's certificate with "
                                   "MLFLOW_TRACKING_SERVER_CERT_PATH=<PEM of its CA> (or skip the check with "
                                   "MLFLOW_TRACKING_INSECURE_TLS=true)",
                                   uri_, what, r.error),
                       true, false);
  if (!r.reached())
    return MlflowError(fmt::format("MLflow tracking server {} unreachable ({}): {}", uri_, what, r.error), false, true);
  // mlflow answers {"error_code": ..., "message": ...}.
  std::string message = r.body;
  const json j = json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("message"))
    message = fmt::format("{}: {}", j.value("error_code", std::string("ERROR")), j["message"].get<std::string>());
  if (message.size() > 500) message = message.substr(0, 500) + "...";
  const bool retryable = r.status == 429 || r.status >= 500;
  return MlflowError(fmt::format("MLflow tracking server {} answered {} with HTTP {}: {}", uri_, what, r.status, message),
                     true, retryable);
}

std::string MlflowTracking::call(const char* method, const std::string& path, const std::string& body) const {
  const HttpResponse r = http_.send(method, uri_ + path, body);
  if (!r.ok()) throw failure(r, fmt::format("{} {}", method, path.substr(0, path.find('?'))));
  return r.body;
}

std::optional<std::string> MlflowTracking::experimentIdByName(const std::string& name) const {
  const std::string path = "/api/2.0/mlflow/experiments/get-by-name?experiment_name=" + urlEncode(name);
  const HttpResponse r = http_.send("GET", uri_ + path);
  if (r.status == 404) {
    const json j = json::parse(r.body, nullptr, false);
    if (j.is_object() && j.value("error_code", "") == "RESOURCE_DOES_NOT_EXIST") return std::nullopt;
  }
  if (!r.ok()) throw failure(r, "GET /api/2.0/mlflow/experiments/get-by-name");
  const json experiment = json::parse(r.body).at("experiment");
  if (experiment.value("lifecycle_stage", "active") != "active")
    throw MlflowError(fmt::format("MLflow tracking server {}: experiment '{}' is deleted; restore it (mlflow "
                                  "experiments restore --experiment-id {}) or set experiment_name to another name",
                                  uri_, name, experiment.value("experiment_id", "")),
                      true, false);
  return experiment.at("experiment_id").get<std::string>();
}

std::string MlflowTracking::createExperiment(const std::string& name, const std::string& artifact_location) const {
  json body = {{"name", name}};
  if (!artifact_location.empty()) body["artifact_location"] = artifact_location;
  return json::parse(call("POST", "/api/2.0/mlflow/experiments/create", body.dump())).at("experiment_id");
}

MlflowRunInfo MlflowTracking::createRun(const std::string& experiment_id, const std::string& run_name,
                                        const std::string& user, std::int64_t start_time,
                                        const std::vector<std::pair<std::string, std::string>>& tags) const {
  const json body = {{"experiment_id", experiment_id}, {"run_name", run_name}, {"user_id", user},
                     {"start_time", start_time},       {"tags", keyValues(tags)}};
  return runInfo(json::parse(call("POST", "/api/2.0/mlflow/runs/create", body.dump())).at("run"));
}

MlflowRunInfo MlflowTracking::getRun(const std::string& run_id) const {
  return runInfo(json::parse(call("GET", "/api/2.0/mlflow/runs/get?run_id=" + urlEncode(run_id), "")).at("run"));
}

std::optional<MlflowRunInfo> MlflowTracking::newestRun(const std::string& experiment_id) const {
  const json body = {{"experiment_ids", {experiment_id}},
                     {"order_by", {"attributes.start_time DESC"}},
                     {"max_results", 1}};
  const json found = json::parse(call("POST", "/api/2.0/mlflow/runs/search", body.dump()));
  if (!found.contains("runs") || found["runs"].empty()) return std::nullopt;
  return runInfo(found["runs"][0]);
}

void MlflowTracking::logBatch(const std::string& run_id, const std::vector<MlflowMetric>& metrics,
                              const std::vector<std::pair<std::string, std::string>>& params) const {
  json m = json::array();
  for (const MlflowMetric& x : metrics)
    m.push_back({{"key", x.key}, {"value", metricValue(x.value)}, {"timestamp", x.timestamp_ms}, {"step", x.step}});
  const json body = {{"run_id", run_id}, {"metrics", m}, {"params", keyValues(params)}};
  call("POST", "/api/2.0/mlflow/runs/log-batch", body.dump());
}

void MlflowTracking::updateRun(const std::string& run_id, MlflowRunStatus status, std::int64_t end_time) const {
  const json body = {{"run_id", run_id}, {"status", mlflowStatusName(status)}, {"end_time", end_time}};
  call("POST", "/api/2.0/mlflow/runs/update", body.dump());
}

std::string MlflowTracking::artifactUrl(const MlflowRunInfo& run, const std::string& path) const {
  constexpr std::string_view kProxy = "mlflow-artifacts:";
  if (!run.artifact_uri.starts_with(kProxy))
    throw MlflowError(fmt::format("MLflow tracking server {}: the run's artifacts go to {}, which hpu-train cannot "
                                  "write; start the server with --serve-artifacts (the default) so that artifacts "
                                  "pass through it",
                                  uri_, run.artifact_uri),
                      true, false);
  std::string root = run.artifact_uri.substr(kProxy.size());
  while (!root.empty() && root.front() == '/') root.erase(0, 1);
  return fmt::format("{}/api/2.0/mlflow-artifacts/artifacts/{}/{}", uri_, urlEncode(root, true), urlEncode(path, true));
}

void MlflowTracking::uploadArtifact(const MlflowRunInfo& run, const std::string& artifact_dir,
                                    const std::string& file) const {
  const std::string name = std::filesystem::path(file).filename().string();
  const HttpResponse r = http_.putFile(artifactUrl(run, artifact_dir.empty() ? name : artifact_dir + "/" + name), file);
  if (!r.ok()) throw failure(r, "PUT /api/2.0/mlflow-artifacts/artifacts");
}

void MlflowTracking::uploadText(const MlflowRunInfo& run, const std::string& name, const std::string& text) const {
  const HttpResponse r = http_.send("PUT", artifactUrl(run, name), text, "application/octet-stream");
  if (!r.ok()) throw failure(r, "PUT /api/2.0/mlflow-artifacts/artifacts");
}

}  // namespace hpu::core
