// MLflow's file store, written directly in the layout mlflow's FileStore
// reads (`mlflow ui --backend-store-uri <save_dir>` shows the runs):
//   <save_dir>/0/meta.yaml                    the "Default" experiment, and .trash/,
//                                             when the store is new (as FileStore makes it)
//   <save_dir>/<exp_id>/meta.yaml             the experiment (found by name, else created)
//   <save_dir>/<exp_id>/<run_id>/meta.yaml    the run: status RUNNING (1), then
//                                             FINISHED (3) or FAILED (4) with end_time
//   .../<run_id>/metrics/<key>                one "timestamp_ms value step" line per value
//   .../<run_id>/params/<key>                 the model's flattened init_args, str() of each
//   .../<run_id>/tags/<key>                   mlflow.runName, mlflow.user, mlflow.source.*, and tags
//   .../<run_id>/artifacts/config.yaml        the resolved config
//   .../<run_id>/artifacts/<stem>/<file>       checkpoints, with log_model
// The run's log_dir is <save_dir>/<exp_id>/<run_id> (checkpoints go there,
// as Lightning puts them). Global rank 0 writes; every rank learns the ids.
#include <pwd.h>
#include <spdlog/fmt/fmt.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>

#include "mlflow_file_store.h"

#include "hparams.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/base/file_io.h"
#include "hpu/core/config/scalars.h"
#include "hpu/core/config/yaml_io.h"
#include "hpu/core/strategies/strategy.h"

namespace hpu::core {

namespace fs = std::filesystem;

std::int64_t nowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string mlflowUser(const Environment& env) {
  if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_name != nullptr) return pw->pw_name;
  return env.get("USER").value_or("unknown");
}

std::string mlflowMetricKey(const std::string& prefix, const std::string& key) {
  // Lightning keeps only the characters MLflow allows in a key.
  static const std::regex kNotAllowed("[^a-zA-Z0-9_/. -]+");
  return std::regex_replace(prefix.empty() ? key : prefix + "-" + key, kNotAllowed, "");
}

namespace {

// MLflow's RunStatus values, as meta.yaml stores them.
int statusNumber(MlflowRunStatus s) {
  switch (s) {
    case MlflowRunStatus::kRunning: return 1;
    case MlflowRunStatus::kFinished: return 3;
    case MlflowRunStatus::kFailed: return 4;
    case MlflowRunStatus::kKilled: return 5;
  }
  return 1;
}

// A YAML scalar as PyYAML's safe_dump writes a str: quoted when it would
// read as another type or is empty.
std::string yamlString(const std::string& s) {
  const bool plain = !s.empty() && !config::parseFloat(s) && !config::parseBool(s) && s != "null" &&
                     s.find_first_of(":#'\"{}[],&*!|>%@`") == std::string::npos && s.front() != ' ' &&
                     s.back() != ' ' && s.front() != '-';
  if (plain) return s;
  std::string quoted = "'";
  for (const char c : s) quoted += c == '\'' ? std::string("''") : std::string(1, c);
  return quoted + "'";
}

std::string fileUri(const fs::path& p) { return "file://" + fs::absolute(p).lexically_normal().string(); }

// The value of `key: value` in a meta.yaml (unquoted), or "".
std::string metaField(const fs::path& meta, const std::string& key) {
  std::ifstream in(meta);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with(key + ": ")) continue;
    std::string v = line.substr(key.size() + 2);
    if (v.size() >= 2 && v.front() == '\'' && v.back() == '\'')
      v = std::regex_replace(v.substr(1, v.size() - 2), std::regex("''"), "'");
    return v;
  }
  return "";
}

std::string randomDigits(int n) {
  std::random_device rd;
  std::string s = std::to_string(1 + rd() % 9);
  while (static_cast<int>(s.size()) < n) s += static_cast<char>('0' + rd() % 10);
  return s;
}

// A metric value as Python's str(float) writes it.
std::string pythonFloat(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return config::formatFloat(v);
}

void write(const fs::path& path, const std::string& text) { writeFileAtomically(path.string(), text); }

std::string randomHex(int n) {
  std::random_device rd;
  std::string s;
  while (static_cast<int>(s.size()) < n) s += fmt::format("{:08x}", rd());
  return s.substr(0, static_cast<std::size_t>(n));
}


}  // namespace

const char* mlflowStatusName(MlflowRunStatus s) {
  switch (s) {
    case MlflowRunStatus::kRunning: return "RUNNING";
    case MlflowRunStatus::kFinished: return "FINISHED";
    case MlflowRunStatus::kFailed: return "FAILED";
    case MlflowRunStatus::kKilled: return "KILLED";
  }
  return "RUNNING";
}

MlflowSettings mlflowSettings(const config::Params& p) {
  MlflowSettings s;
  s.experiment_name = p.getString("experiment_name");
  if (p.has("run_name")) s.run_name = p.getString("run_name");
  if (p.has("tracking_uri")) s.tracking_uri = p.getString("tracking_uri");
  s.save_dir = p.getString("save_dir");
  s.prefix = p.getString("prefix");
  if (p.has("artifact_location")) s.artifact_location = p.getString("artifact_location");
  if (p.has("run_id")) s.run_id = p.getString("run_id");
  if (p.has("synchronous")) s.synchronous = p.getBool("synchronous");
  s.log_model = p.getBool("log_model");
  if (p.has("tags"))
    for (const auto& [k, v] : p.node("tags").entries()) s.tags.emplace_back(k, v.isNull() ? "" : v.str());
  return s;
}

std::vector<std::pair<std::string, std::string>> mlflowRunTags(const MlflowSettings& s, const std::string& run_name) {
  std::vector<std::pair<std::string, std::string>> tags = s.tags;
  tags.emplace_back("mlflow.runName", run_name);
  tags.emplace_back("mlflow.user", s.user);
  tags.emplace_back("mlflow.source.name", "hpu-train");
  tags.emplace_back("mlflow.source.type", "LOCAL");
  return tags;
}

MlflowFileStore::MlflowFileStore(MlflowSettings settings) : s_(std::move(settings)) {}

std::string MlflowFileStore::runDir() const { return (fs::path(s_.save_dir) / experiment_id_ / run_id_).string(); }
std::string MlflowFileStore::logDir() const { return runDir(); }

void MlflowFileStore::setup(const std::string&, Strategy& strategy, bool continue_run, const Environment& env) {
  s_.user = mlflowUser(env);
  global_zero_ = strategy.isGlobalZero();
  std::string ids;
  if (global_zero_) ids = createRun(continue_run);
  ids = strategy.broadcast(ids, 0);
  const auto slash = ids.find('/');
  experiment_id_ = ids.substr(0, slash);
  run_id_ = ids.substr(slash + 1);
}

void MlflowFileStore::logHyperparams(const config::Node& hparams) {
  std::vector<std::pair<std::string, std::string>> params;
  for (const Hparam& h : flattenHparams(hparams, "/")) params.emplace_back(h.key, h.text);
  writeParams(params);
}

void MlflowFileStore::writeParams(const std::vector<std::pair<std::string, std::string>>& params) {
  for (const auto& [key, text] : params) write(fs::path(runDir()) / "params" / key, text.substr(0, 500));
}

void MlflowFileStore::logMetrics(const std::map<std::string, double>& metrics, std::int64_t step) {
  const std::int64_t ms = nowMillis();
  for (const auto& [k, v] : metrics)
    pending_[mlflowMetricKey(s_.prefix, k)] += fmt::format("{} {} {}\n", ms, pythonFloat(v), step);
  if (s_.synchronous.value_or(true)) save();
}

void MlflowFileStore::appendMetrics(const std::vector<MlflowMetric>& metrics) {
  for (const MlflowMetric& m : metrics)
    pending_[m.key] += fmt::format("{} {} {}\n", m.timestamp_ms, pythonFloat(m.value), m.step);
  save();
}

void MlflowFileStore::logConfig(const config::Node& config) { writeConfig(config::emitYaml(config)); }
void MlflowFileStore::writeConfig(const std::string& yaml) {
  write(fs::path(runDir()) / "artifacts" / "config.yaml", yaml);
}

void MlflowFileStore::afterSaveCheckpoint(const std::string& path) {
  if (s_.log_model && global_zero_) checkpoints_.push_back(path);
}

void MlflowFileStore::copyArtifact(const std::string& file, const std::string& artifact_dir) {
  const fs::path dir = fs::path(runDir()) / "artifacts" / artifact_dir;
  fs::create_directories(dir);
  const fs::path target = dir / fs::path(file).filename();
  const fs::path partial = target.string() + ".partial";
  fs::copy_file(file, partial, fs::copy_options::overwrite_existing);
  fs::rename(partial, target);
}

void MlflowFileStore::save() {
  for (const auto& [key, lines] : pending_) {
    const fs::path path = fs::path(runDir()) / "metrics" / key;
    fs::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::app);
    out << lines;
    if (!out) throw Error(fmt::format("MLFlowLogger: cannot append to {}", path.string()));
  }
  pending_.clear();
}

// Drops the values logged at `step` and later: the restarted round logs
// them again.
void MlflowFileStore::resumeAt(std::int64_t step) {
  if (!global_zero_) return;  // every rank resumes; one writes
  save();
  const fs::path dir = fs::path(runDir()) / "metrics";
  std::vector<fs::path> files;  // listed first: rewriting adds and renames files
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file()) files.push_back(e.path());
  for (const fs::path& file : files) {
    std::ifstream in(file);
    std::string kept, line;
    while (std::getline(in, line)) {
      const auto space = line.rfind(' ');
      if (space == std::string::npos || std::strtoll(line.c_str() + space + 1, nullptr, 10) < step) kept += line + "\n";
    }
    write(file, kept);
  }
}

// Every rank ends the stage; global rank 0, which knows the run's start,
// writes its end (and, with log_model, copies the checkpoints that remain,
// each under artifacts/<its stem>/, as Lightning's logger uploads them).
void MlflowFileStore::finalize(bool succeeded) {
  if (!global_zero_) return;
  save();
  for (const std::string& path : checkpoints_)
    if (fs::exists(path)) copyArtifact(path, fs::path(path).stem().string());
  checkpoints_.clear();
  endRun(succeeded ? MlflowRunStatus::kFinished : MlflowRunStatus::kFailed);
}

void MlflowFileStore::endRun(MlflowRunStatus status) {
  save();
  writeRunMeta(status, nowMillis());
}

void MlflowFileStore::findOrCreateExperiment() {
  const fs::path root(s_.save_dir);
  if (!fs::exists(root)) {
    // A new store holds the Default experiment, as FileStore creates it.
    writeExperimentMeta("0", "Default", "");
    fs::create_directories(root / ".trash");
  }
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory() && metaField(e.path() / "meta.yaml", "name") == s_.experiment_name &&
        metaField(e.path() / "meta.yaml", "lifecycle_stage") == "active")
      experiment_id_ = e.path().filename().string();
  if (experiment_id_.empty()) {
    experiment_id_ = randomDigits(18);
    writeExperimentMeta(experiment_id_, s_.experiment_name, s_.artifact_location);
  }
}

void MlflowFileStore::openSpoolRun(const std::string& run_id, std::int64_t start_time) {
  findOrCreateExperiment();
  run_id_ = run_id;
  start_time_ = start_time;
  if (s_.run_name.empty()) s_.run_name = "run-" + run_id_.substr(0, 8);
  writeRunMeta(MlflowRunStatus::kRunning, std::nullopt);
  for (const auto& d : {"metrics", "params", "artifacts"}) fs::create_directories(fs::path(runDir()) / d);
  for (const auto& [k, v] : mlflowRunTags(s_, s_.run_name)) write(fs::path(runDir()) / "tags" / k, v);
}

// Finds or creates the experiment, then the run (or resumes run_id, or
// with `continue_run`, an elastic restart, the experiment's newest run);
// returns "<experiment_id>/<run_id>".
std::string MlflowFileStore::createRun(bool continue_run) {
  const fs::path root(s_.save_dir);
  if (s_.run_id.empty() && continue_run && fs::exists(root)) s_.run_id = newestRun();
  if (!s_.run_id.empty()) {
    if (fs::exists(root))
      for (const auto& e : fs::directory_iterator(root))
        if (fs::exists(e.path() / s_.run_id / "meta.yaml")) {
          experiment_id_ = e.path().filename().string();
          run_id_ = s_.run_id;
          start_time_ = std::stoll(metaField(e.path() / run_id_ / "meta.yaml", "start_time"));
          s_.run_name = metaField(e.path() / run_id_ / "meta.yaml", "run_name");
          writeRunMeta(MlflowRunStatus::kRunning, std::nullopt);
          return experiment_id_ + "/" + run_id_;
        }
    throw UsageError(fmt::format("MLFlowLogger: run_id {} is not in {}; leave run_id null to start a new run",
                                 s_.run_id, root.string()));
  }
  openSpoolRun(randomHex(32), nowMillis());
  return experiment_id_ + "/" + run_id_;
}

// The id of the newest run (by start_time) of the experiment named
// experiment_name, or "" if it has none.
std::string MlflowFileStore::newestRun() const {
  std::string newest;
  std::int64_t newest_start = -1;
  for (const auto& e : fs::directory_iterator(s_.save_dir)) {
    if (!e.is_directory() || metaField(e.path() / "meta.yaml", "name") != s_.experiment_name) continue;
    for (const auto& run : fs::directory_iterator(e.path())) {
      const std::string start = metaField(run.path() / "meta.yaml", "start_time");
      if (start.empty() || start == "null") continue;
      if (const std::int64_t t = std::strtoll(start.c_str(), nullptr, 10); t > newest_start) {
        newest_start = t;
        newest = run.path().filename().string();
      }
    }
  }
  return newest;
}

void MlflowFileStore::writeExperimentMeta(const std::string& id, const std::string& name,
                                          const std::string& artifact_location) {
  const fs::path dir = fs::path(s_.save_dir) / id;
  const std::int64_t ms = nowMillis();
  write(dir / "meta.yaml",
        fmt::format("artifact_location: {}\ncreation_time: {}\nexperiment_id: '{}'\nlast_update_time: {}\n"
                    "lifecycle_stage: active\nname: {}\n",
                    artifact_location.empty() ? fileUri(dir) : artifact_location, ms, id, ms, yamlString(name)));
}

// The run's meta.yaml as FileStore persists a RunInfo (keys sorted).
void MlflowFileStore::writeRunMeta(MlflowRunStatus status, std::optional<std::int64_t> end_time) {
  write(fs::path(runDir()) / "meta.yaml",
        fmt::format("artifact_uri: {}\ndeleted_time: null\nend_time: {}\nentry_point_name: ''\nexperiment_id: '{}'\n"
                    "lifecycle_stage: active\nrun_id: {}\nrun_name: {}\nrun_uuid: {}\nsource_name: ''\n"
                    "source_type: 4\nsource_version: ''\nstart_time: {}\nstatus: {}\ntags: []\nuser_id: {}\n",
                    fileUri(fs::path(runDir()) / "artifacts"), end_time ? std::to_string(*end_time) : "null",
                    experiment_id_, run_id_, yamlString(s_.run_name), run_id_, start_time_, statusNumber(status),
                    yamlString(s_.user)));
}

}  // namespace hpu::core
