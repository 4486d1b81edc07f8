// The background sender of a run on an MLflow tracking server: the
// training thread queues values and returns; a thread of the sender sends
// them in log-batch requests, in order, retrying with mlflow's backoff
// (MlflowRetry) while the server does not answer or answers 429 / 5xx.
// When the tries run out, or the queue holds `capacity` metric values, or
// the server refuses a request, it says so once and writes what it holds,
// and everything after, to the local file store instead (the spool, opened
// on first use): nothing is lost. A refused request's values are spooled
// too. The run's end status goes where its values went.
// Thread-safety: queue calls and finish() from one thread (the training
// thread); the sender's thread does the rest.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "mlflow_rest.h"

namespace hpu::core {

class MlflowSender {
 public:
  struct Options {
    MlflowRetry retry;
    std::size_t capacity = 100'000;  // metric values queued before the spool takes over
  };
  // `open_spool` opens the spool's run (called once, on the sender's thread).
  MlflowSender(const MlflowTracking& server, MlflowRunInfo run, std::function<MlflowFileStore&()> open_spool,
               Options options);
  ~MlflowSender();  // stops the thread; what is left queued is spooled
  MlflowSender(const MlflowSender&) = delete;
  MlflowSender& operator=(const MlflowSender&) = delete;

  void metrics(std::vector<MlflowMetric> values);
  void params(std::vector<std::pair<std::string, std::string>> params);
  // Uploads `file` as <artifact_dir>/<its name> (the file must stay until the sender is done).
  void artifact(std::string file, std::string artifact_dir);
  // Uploads `yaml` as the run's config.yaml.
  void config(std::string yaml);
  // Waits until everything queued is sent or spooled, at most until `deadline`.
  void flush(std::chrono::steady_clock::time_point deadline);
  // Sends what is queued, then ends the run with `status`; by `deadline`,
  // what is not sent is spooled with the status. Joins the thread.
  void finish(MlflowRunStatus status, std::chrono::steady_clock::time_point deadline);
  // True once values go to the spool.
  bool spooling() const { return spooling_.load(); }
  // The longest the sender keeps trying one request: its retry policy's waits.
  std::chrono::milliseconds retryBudget() const;

 private:
  struct Item {
    enum class Kind { kMetrics, kParams, kArtifact, kConfig, kEnd, kNone } kind;  // kNone: nothing left to do
    std::vector<MlflowMetric> metrics;
    std::vector<std::pair<std::string, std::string>> params;
    std::string file, artifact_dir;
    std::string content;  // kConfig's text
    MlflowRunStatus status = MlflowRunStatus::kFinished;
  };
  void push(Item item);
  void loop();  // the sender's thread
  // One request: `item`, or its first log-batch's worth of values.
  void send(const Item& item) const;
  // Sends `item` whole, request by request, each with retries. False: given
  // up (the reason in `why`); `item` then holds what was not sent.
  bool sendWithRetries(Item& item, std::string* why);
  void spool(const Item& item);
  // From here on, items go to the spool; `server_down`: the server was
  // given up for not answering (else it answers, but too late or too slowly).
  void startSpooling(const std::string& why, bool server_down = false);

  const MlflowTracking& server_;
  MlflowRunInfo run_;
  std::function<MlflowFileStore&()> open_spool_;
  MlflowFileStore* spool_ = nullptr;  // the sender's thread only
  Options options_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Item> queue_;
  std::size_t queued_metrics_ = 0;
  bool busy_ = false;     // the sender holds an item it took from the queue
  bool stopping_ = false;
  std::atomic<bool> spooling_{false};
  bool failing_ = false, warned_retrying_ = false, server_down_ = false;  // the sender's thread only
  std::chrono::steady_clock::time_point give_up_at_ = std::chrono::steady_clock::time_point::max();
  std::mutex join_mutex_;  // finish() may come from a signal's watcher and from finalize
  std::thread thread_;
};

}  // namespace hpu::core
