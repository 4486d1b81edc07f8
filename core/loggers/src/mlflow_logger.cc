// MLFlowLogger: Lightning's MLflow logger on MLflow's file store, written
// directly in the layout mlflow's FileStore reads (`mlflow ui
// --backend-store-uri <save_dir>` shows the runs):
//   <save_dir>/0/meta.yaml                    the "Default" experiment, and .trash/,
//                                             when the store is new (as FileStore makes it)
//   <save_dir>/<exp_id>/meta.yaml             the experiment (found by name, else created)
//   <save_dir>/<exp_id>/<run_id>/meta.yaml    the run: status RUNNING (1), then
//                                             FINISHED (3) or FAILED (4) with end_time
//   .../<run_id>/metrics/<key>                one "timestamp_ms value step" line per value
//   .../<run_id>/params/<key>                 the model's flattened init_args, str() of each
//   .../<run_id>/tags/<key>                   mlflow.runName, mlflow.user, mlflow.source.*, and tags
//   .../<run_id>/artifacts/config.yaml        the resolved config
// The run's log_dir is <save_dir>/<exp_id>/<run_id> (checkpoints go there,
// as Lightning puts them). Global rank 0 writes; every rank learns the ids.
#include <pwd.h>
#include <spdlog/fmt/fmt.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>

#include "hparams.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/base/file_io.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/config/scalars.h"
#include "hpu/core/config/yaml_io.h"
#include "hpu/core/loggers/logger.h"
#include "hpu/core/strategies/strategy.h"

namespace hpu::core {
namespace {

namespace fs = std::filesystem;
using config::Type;

// MLflow's RunStatus values, as meta.yaml stores them.
constexpr int kRunning = 1, kFinished = 3, kFailed = 4;

std::int64_t nowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string userName() {
  if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_name != nullptr) return pw->pw_name;
  const char* user = std::getenv("USER");
  return user != nullptr ? user : "unknown";
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

std::string randomHex(int n) {
  std::random_device rd;
  std::string s;
  while (static_cast<int>(s.size()) < n) s += fmt::format("{:08x}", rd());
  return s.substr(0, static_cast<std::size_t>(n));
}

class MLFlowLogger final : public Logger {
 public:
  explicit MLFlowLogger(const config::Params& p)
      : experiment_name_(p.getString("experiment_name")),
        run_name_(p.has("run_name") ? p.getString("run_name") : ""),
        save_dir_(p.getString("save_dir")),
        prefix_(p.getString("prefix")),
        artifact_location_(p.has("artifact_location") ? p.getString("artifact_location") : ""),
        run_id_(p.has("run_id") ? p.getString("run_id") : ""),
        synchronous_(!p.has("synchronous") || p.getBool("synchronous")) {
    if (p.has("tracking_uri")) {
      const std::string uri = p.getString("tracking_uri");
      if (!uri.starts_with("file:"))
        p.fail("tracking_uri", fmt::format("'{}': MLFlowLogger writes MLflow's file store only; give a file: URI or "
                                           "save_dir (a tracking server is not reachable from an emulated run)",
                                           uri));
      save_dir_ = uri.substr(uri.starts_with("file://") ? 7 : 5);
    }
    if (p.has("tags"))
      for (const auto& [k, v] : p.node("tags").entries()) tags_.emplace_back(k, v.isNull() ? "" : v.str());
  }

  void setup(const std::string& default_root_dir, Strategy& strategy, bool continue_run) override {
    global_zero_ = strategy.isGlobalZero();
    std::string ids;
    if (global_zero_) ids = createRun(continue_run);
    ids = strategy.broadcast(ids, 0);
    const auto slash = ids.find('/');
    experiment_id_ = ids.substr(0, slash);
    run_id_ = ids.substr(slash + 1);
  }
  std::string name() const override { return experiment_id_; }
  std::string version() const override { return run_id_; }
  std::string logDir() const override { return runDir().string(); }

  void logHyperparams(const config::Node& hparams) override {
    for (const Hparam& h : flattenHparams(hparams, "/")) write(runDir() / "params" / h.key, h.text.substr(0, 500));
  }

  // Lightning keeps only the characters MLflow allows in a key.
  void logMetrics(const std::map<std::string, double>& metrics, std::int64_t step) override {
    static const std::regex kNotAllowed("[^a-zA-Z0-9_/. -]+");
    const std::int64_t ms = nowMillis();
    for (const auto& [k, v] : metrics) {
      const std::string key = std::regex_replace(prefix_.empty() ? k : prefix_ + "-" + k, kNotAllowed, "");
      pending_[key] += fmt::format("{} {} {}\n", ms, pythonFloat(v), step);
    }
    if (synchronous_) save();
  }

  void logConfig(const config::Node& config) override {
    write(runDir() / "artifacts" / "config.yaml", config::emitYaml(config));
  }

  void save() override {
    for (const auto& [key, lines] : pending_) {
      const fs::path path = runDir() / "metrics" / key;
      fs::create_directories(path.parent_path());
      std::ofstream out(path, std::ios::app);
      out << lines;
      if (!out) throw Error(fmt::format("MLFlowLogger: cannot append to {}", path.string()));
    }
    pending_.clear();
  }

  // Drops the values logged at `step` and later: the restarted round logs
  // them again.
  void resumeAt(std::int64_t step) override {
    if (!global_zero_) return;  // every rank resumes; one writes
    save();
    const fs::path dir = runDir() / "metrics";
    std::vector<fs::path> files;  // listed first: rewriting adds and renames files
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(dir, ec))
      if (e.is_regular_file()) files.push_back(e.path());
    for (const fs::path& file : files) {
      std::ifstream in(file);
      std::string kept, line;
      while (std::getline(in, line)) {
        const auto space = line.rfind(' ');
        if (space == std::string::npos || std::strtoll(line.c_str() + space + 1, nullptr, 10) < step)
          kept += line + "\n";
      }
      write(file, kept);
    }
  }

  // Every rank ends the stage; global rank 0, which knows the run's start,
  // writes its end.
  void finalize(bool succeeded) override {
    if (!global_zero_) return;
    save();
    writeRunMeta(succeeded ? kFinished : kFailed, nowMillis());
  }

 private:
  fs::path runDir() const { return fs::path(save_dir_) / experiment_id_ / run_id_; }

  static std::string pythonFloat(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return config::formatFloat(v);
  }

  static void write(const fs::path& path, const std::string& text) { writeFileAtomically(path.string(), text); }

  // Finds or creates the experiment, then the run (or resumes run_id, or
  // with `continue_run`, an elastic restart, the experiment's newest run);
  // returns "<experiment_id>/<run_id>".
  std::string createRun(bool continue_run) {
    const fs::path root(save_dir_);
    if (!fs::exists(root)) {
      // A new store holds the Default experiment, as FileStore creates it.
      writeExperimentMeta("0", "Default", "");
      fs::create_directories(root / ".trash");
    }
    if (run_id_.empty() && continue_run) run_id_ = newestRun(root);
    if (!run_id_.empty()) {
      for (const auto& e : fs::directory_iterator(root))
        if (fs::exists(e.path() / run_id_ / "meta.yaml")) {
          experiment_id_ = e.path().filename().string();
          start_time_ = std::stoll(metaField(e.path() / run_id_ / "meta.yaml", "start_time"));
          run_name_ = metaField(e.path() / run_id_ / "meta.yaml", "run_name");
          writeRunMeta(kRunning, std::nullopt);
          return experiment_id_ + "/" + run_id_;
        }
      throw UsageError(fmt::format("MLFlowLogger: run_id {} is not in {}; leave run_id null to start a new run",
                                   run_id_, root.string()));
    }
    for (const auto& e : fs::directory_iterator(root))
      if (e.is_directory() && metaField(e.path() / "meta.yaml", "name") == experiment_name_ &&
          metaField(e.path() / "meta.yaml", "lifecycle_stage") == "active")
        experiment_id_ = e.path().filename().string();
    if (experiment_id_.empty()) {
      experiment_id_ = randomDigits(18);
      writeExperimentMeta(experiment_id_, experiment_name_, artifact_location_);
    }
    run_id_ = randomHex(32);
    start_time_ = nowMillis();
    if (run_name_.empty()) run_name_ = "run-" + run_id_.substr(0, 8);
    writeRunMeta(kRunning, std::nullopt);
    for (const auto& d : {"metrics", "params", "artifacts"}) fs::create_directories(runDir() / d);
    std::vector<std::pair<std::string, std::string>> tags = tags_;
    tags.emplace_back("mlflow.runName", run_name_);
    tags.emplace_back("mlflow.user", userName());
    tags.emplace_back("mlflow.source.name", "hpu-train");
    tags.emplace_back("mlflow.source.type", "LOCAL");
    for (const auto& [k, v] : tags) write(runDir() / "tags" / k, v);
    return experiment_id_ + "/" + run_id_;
  }

  // The id of the newest run (by start_time) of the experiment named
  // experiment_name_, or "" if it has none.
  std::string newestRun(const fs::path& root) const {
    std::string newest;
    std::int64_t newest_start = -1;
    for (const auto& e : fs::directory_iterator(root)) {
      if (!e.is_directory() || metaField(e.path() / "meta.yaml", "name") != experiment_name_) continue;
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

  void writeExperimentMeta(const std::string& id, const std::string& name, const std::string& artifact_location) {
    const fs::path dir = fs::path(save_dir_) / id;
    const std::int64_t ms = nowMillis();
    write(dir / "meta.yaml",
          fmt::format("artifact_location: {}\ncreation_time: {}\nexperiment_id: '{}'\nlast_update_time: {}\n"
                      "lifecycle_stage: active\nname: {}\n",
                      artifact_location.empty() ? fileUri(dir) : artifact_location, ms, id, ms, yamlString(name)));
  }

  // The run's meta.yaml as FileStore persists a RunInfo (keys sorted).
  void writeRunMeta(int status, std::optional<std::int64_t> end_time) {
    write(runDir() / "meta.yaml",
          fmt::format("artifact_uri: {}\ndeleted_time: null\nend_time: {}\nentry_point_name: ''\nexperiment_id: '{}'\n"
                      "lifecycle_stage: active\nrun_id: {}\nrun_name: {}\nrun_uuid: {}\nsource_name: ''\n"
                      "source_type: 4\nsource_version: ''\nstart_time: {}\nstatus: {}\ntags: []\nuser_id: {}\n",
                      fileUri(runDir() / "artifacts"), end_time ? std::to_string(*end_time) : "null", experiment_id_,
                      run_id_, yamlString(run_name_), run_id_, start_time_, status, yamlString(userName())));
  }

  std::string experiment_name_, run_name_, save_dir_, prefix_, artifact_location_;
  std::string experiment_id_, run_id_;
  std::vector<std::pair<std::string, std::string>> tags_;
  bool synchronous_;
  bool global_zero_ = true;
  std::int64_t start_time_ = 0;
  std::map<std::string, std::string> pending_;  // metric key -> lines not yet appended
};

HPU_REGISTER_COMPONENT(
    Logger,
    config::ComponentSchema{
        config::ComponentKind::kLogger,
        "MLFlowLogger",
        "lightning.pytorch.loggers",
        {"MLFlowLogger",
         "",
         {{"experiment_name", Type::string(), "lightning_logs", "The experiment: found by name, else created."},
          {"run_name", Type::optional(Type::string()), "null", "The run's name (null: run-<first 8 of its id>)."},
          {"tracking_uri", Type::optional(Type::string()), "null",
           "A file: URI of the store (instead of save_dir); servers are not supported."},
          {"tags", Type::optional(Type::dict()), "null", "Tags of the run: {name: value}."},
          {"save_dir", Type::string(), "./mlruns", "The file store's directory."},
          {"log_model", Type::boolean(), "false",
           "Copy checkpoints into the run's artifacts.", "checkpoints stay in ModelCheckpoint's dirpath; the file store holds metrics, params and tags"},
          {"prefix", Type::string(), "''", "Prefix of every metric key."},
          {"artifact_location", Type::optional(Type::string()), "null",
           "Artifact location of a new experiment (null: <save_dir>/<experiment_id>)."},
          {"run_id", Type::optional(Type::string()), "null", "Resume this run: its metrics are appended to."},
          {"synchronous", Type::optional(Type::boolean()), "null",
           "Append each metric as it is logged (true, null), or at the end of the stage (false)."}}},
        "Logs to MLflow's file store (mlruns/): params, metrics, tags, the config as an artifact; "
        "`mlflow ui --backend-store-uri mlruns` shows the runs."},
    [](const config::Params& p) { return std::make_unique<MLFlowLogger>(p); });

}  // namespace
}  // namespace hpu::core
