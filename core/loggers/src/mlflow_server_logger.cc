#include "mlflow_server_logger.h"

#include <signal.h>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "hparams.h"
#include "hpu/core/config/yaml_io.h"
#include "hpu/core/strategies/strategy.h"
#include "mlflow_rest.h"
#include "mlflow_sender.h"

namespace hpu::core {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// SIGINT / SIGTERM while a run is open: the handler notes the signal, the
// run's watcher ends the run as KILLED, puts the previous handlers back and
// raises the signal again. A second signal does not wait.
std::atomic<int> gSignal{0};
struct sigaction gPreviousInt {}, gPreviousTerm {};

void onTerminationSignal(int signal) {
  if (gSignal.exchange(signal) != 0) {
    ::sigaction(SIGINT, &gPreviousInt, nullptr);
    ::sigaction(SIGTERM, &gPreviousTerm, nullptr);
    ::kill(::getpid(), signal);
  }
}

bool offlineAllowed(const Environment& env) {
  const std::string v = env.get("MLFLOW_TRACKING_OFFLINE").value_or("");
  return v == "true" || v == "1";
}

// f(), tried again under `retry` while it fails in a way worth retrying.
template <typename F>
auto withRetries(const MlflowRetry& retry, F&& f) -> decltype(f()) {
  for (int attempt = 0;; ++attempt) {
    try {
      return f();
    } catch (const MlflowError& e) {
      if (!e.retryable() || attempt >= retry.max_retries) throw;
      std::this_thread::sleep_for(retry.delayBefore(attempt + 1));
    }
  }
}

class MlflowServerLogger final : public Logger {
 public:
  explicit MlflowServerLogger(MlflowSettings settings)
      : s_(std::move(settings)) {}

  // A run the stage did not end (the process fails before fit, or
  // between stages) ends as FAILED.
  ~MlflowServerLogger() override {
    if (sender_ && !ended_) {
      try {
        endRun(MlflowRunStatus::kFailed, std::chrono::seconds(10));
      } catch (const std::exception& e) {
        spdlog::warn("MLFlowLogger: {}", e.what());
      }
    }
    stopWatching();
  }

  void setup(const std::string& default_root_dir, Strategy& strategy, bool continue_run,
             const Environment& env) override {
    server_.emplace(s_.tracking_uri, mlflowHttpOptions(env));
    retry_ = MlflowRetry::fromEnv(env);
    offline_allowed_ = offlineAllowed(env);
    s_.user = mlflowUser(env);
    global_zero_ = strategy.isGlobalZero();
    std::string ids;
    if (global_zero_) ids = startRun(continue_run);
    ids = strategy.broadcast(ids, 0);
    if (ids.starts_with("offline/")) {  // rank 0 logs to the file store: every rank does as it does
      if (!offline_) offline_ = std::make_unique<MlflowFileStore>(s_);
      offline_->setup(default_root_dir, strategy, continue_run, env);
      return;
    }
    const auto slash = ids.find('/');
    run_.experiment_id = ids.substr(0, slash);
    run_.run_id = ids.substr(slash + 1);
    // Lightning's place for a logger without a local directory:
    // <default_root_dir>/<experiment id>/<run id> (checkpoints/ in it).
    log_dir_ = (fs::path(default_root_dir.empty() ? "." : default_root_dir) / run_.experiment_id / run_.run_id).string();
  }

  std::string name() const override { return offline_ ? offline_->name() : run_.experiment_id; }
  std::string version() const override { return offline_ ? offline_->version() : run_.run_id; }
  std::string logDir() const override { return offline_ ? offline_->logDir() : log_dir_; }

  void logHyperparams(const config::Node& hparams) override {
    if (offline_) return offline_->logHyperparams(hparams);
    if (!sender_) return;
    std::vector<std::pair<std::string, std::string>> params;
    for (const Hparam& h : flattenHparams(hparams, "/")) params.emplace_back(h.key, h.text.substr(0, 500));
    sender_->params(std::move(params));
  }

  void logMetrics(const std::map<std::string, double>& metrics, std::int64_t step) override {
    if (offline_) return offline_->logMetrics(metrics, step);
    if (!sender_) return;
    const std::int64_t ms = nowMillis();
    std::vector<MlflowMetric> values;
    for (const auto& [k, v] : metrics) values.push_back({mlflowMetricKey(s_.prefix, k), v, ms, step});
    sender_->metrics(std::move(values));
  }

  void logConfig(const config::Node& config) override {
    if (offline_) return offline_->logConfig(config);
    if (!sender_) return;
    sender_->config(config::emitYaml(config));
  }

  void afterSaveCheckpoint(const std::string& path) override {
    if (offline_) return offline_->afterSaveCheckpoint(path);
    if (s_.log_model && sender_) checkpoints_.push_back(path);
  }

  // With synchronous: true, waits until what was logged is sent or spooled
  // (at most the sender's retry budget); otherwise returns at once.
  void save() override {
    if (offline_) return offline_->save();
    if (sender_ && s_.synchronous.value_or(false)) sender_->flush(Clock::now() + sender_->retryBudget() + kRequestSlack);
  }

  // A tracking server keeps every value it took: the values of the steps
  // an elastic restart redoes stay in the history beside their new ones
  // (MLflow's REST API deletes no metric value).
  void resumeAt(std::int64_t step) override {
    if (offline_) offline_->resumeAt(step);
  }

  void finalize(bool succeeded) override {
    if (offline_) return offline_->finalize(succeeded);
    if (!sender_) return;
    // With log_model, the checkpoints that remain, each under <its stem>/,
    // as Lightning's logger uploads them at the end.
    for (const std::string& path : checkpoints_)
      if (fs::exists(path)) sender_->artifact(path, fs::path(path).stem().string());
    checkpoints_.clear();
    endRun(succeeded ? MlflowRunStatus::kFinished : MlflowRunStatus::kFailed, sender_->retryBudget() + kRequestSlack);
  }

 private:
  static constexpr std::chrono::seconds kRequestSlack{30};

  // Finds or creates the experiment and creates (or resumes) the run;
  // returns "<experiment_id>/<run_id>", or "offline/" when the server is
  // unreachable and MLFLOW_TRACKING_OFFLINE allows the file store.
  std::string startRun(bool continue_run) {
    try {
      const MlflowRetry startup{.max_retries = 2, .backoff_factor = 0.5, .jitter = 0};
      run_ = withRetries(startup, [&] { return openRun(continue_run); });
    } catch (const MlflowError& e) {
      if (!e.reached() && offline_allowed_) {
        spdlog::warn("MLFlowLogger: {}; MLFLOW_TRACKING_OFFLINE is set: the run logs to the local file store {}",
                     e.what(), s_.save_dir);
        return "offline/";
      }
      if (!e.reached())
        throw Error(fmt::format("{}. Start the server (mlflow server --host HOST --port PORT), correct "
                                "trainer.logger's tracking_uri, or set MLFLOW_TRACKING_OFFLINE=true to log to the local "
                                "file store ({}) instead",
                                e.what(), s_.save_dir));
      throw Error(fmt::format("MLFlowLogger: {}", e.what()));
    }
    MlflowSender::Options options;
    options.retry = retry_;
    sender_ = std::make_unique<MlflowSender>(*server_, run_, [this]() -> MlflowFileStore& { return openSpool(); },
                                             options);
    startWatching();
    return run_.experiment_id + "/" + run_.run_id;
  }

  MlflowRunInfo openRun(bool continue_run) {
    if (!s_.run_id.empty()) {
      MlflowRunInfo run = server_->getRun(s_.run_id);
      server_->updateRun(run.run_id, MlflowRunStatus::kRunning, nowMillis());
      return run;
    }
    std::optional<std::string> experiment = server_->experimentIdByName(s_.experiment_name);
    if (!experiment) experiment = server_->createExperiment(s_.experiment_name, s_.artifact_location);
    if (continue_run) {
      if (std::optional<MlflowRunInfo> newest = server_->newestRun(*experiment)) {
        server_->updateRun(newest->run_id, MlflowRunStatus::kRunning, nowMillis());
        return *newest;
      }
    }
    const std::string run_name = s_.run_name;
    MlflowRunInfo run = server_->createRun(*experiment, run_name, s_.user, nowMillis(), mlflowRunTags(s_, run_name));
    return run;
  }

  MlflowFileStore& openSpool() {
    spool_ = std::make_unique<MlflowFileStore>(s_);
    spool_->openSpoolRun(run_.run_id, nowMillis());
    return *spool_;
  }

  // Sends what is queued and the run's end, spooling what is not sent within `patience`.
  void endRun(MlflowRunStatus status, std::chrono::milliseconds patience) {
    stopWatching();
    ended_ = true;
    sender_->finish(status, Clock::now() + patience);
  }

  // The watcher of SIGINT / SIGTERM (see onTerminationSignal).
  void startWatching() {
    gSignal = 0;
    struct sigaction action {};
    action.sa_handler = onTerminationSignal;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &gPreviousInt);
    ::sigaction(SIGTERM, &action, &gPreviousTerm);
    watcher_ = std::thread([this] {
      std::unique_lock lock(watch_mutex_);
      while (!watch_done_) {
        watch_changed_.wait_for(lock, std::chrono::milliseconds(50));
        if (const int signal = gSignal.load(); signal != 0 && !watch_done_) {
          lock.unlock();
          spdlog::warn("MLFlowLogger: {}: the run {} ends as KILLED", ::strsignal(signal), run_.run_id);
          sender_->finish(MlflowRunStatus::kKilled, Clock::now() + std::chrono::seconds(10));
          ::sigaction(SIGINT, &gPreviousInt, nullptr);
          ::sigaction(SIGTERM, &gPreviousTerm, nullptr);
          ::kill(::getpid(), signal);
          return;
        }
      }
    });
  }

  void stopWatching() {
    if (!watcher_.joinable()) return;
    {
      std::lock_guard lock(watch_mutex_);
      watch_done_ = true;
    }
    watch_changed_.notify_all();
    watcher_.join();
    if (gSignal.load() == 0) {
      ::sigaction(SIGINT, &gPreviousInt, nullptr);
      ::sigaction(SIGTERM, &gPreviousTerm, nullptr);
    }
  }

  MlflowSettings s_;
  // From setup on: the server, and what the environment says of it.
  std::optional<MlflowTracking> server_;
  MlflowRetry retry_;
  bool offline_allowed_ = false;  // MLFLOW_TRACKING_OFFLINE
  MlflowRunInfo run_;
  std::string log_dir_;
  bool global_zero_ = true;
  bool ended_ = false;  // finalize ended the run
  std::vector<std::string> checkpoints_;
  std::unique_ptr<MlflowFileStore> spool_, offline_;
  std::unique_ptr<MlflowSender> sender_;
  std::thread watcher_;
  std::mutex watch_mutex_;
  std::condition_variable watch_changed_;
  bool watch_done_ = false;
};

}  // namespace

std::unique_ptr<Logger> makeMlflowServerLogger(MlflowSettings settings) {
  return std::make_unique<MlflowServerLogger>(std::move(settings));
}

}  // namespace hpu::core
