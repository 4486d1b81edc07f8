#include "mlflow_sender.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace hpu::core {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kMetricsPerBatch = 1000, kParamsPerBatch = 100;  // log-batch's limits

}  // namespace

MlflowSender::MlflowSender(const MlflowTracking& server, MlflowRunInfo run,
                           std::function<MlflowFileStore&()> open_spool, Options options)
    : server_(server), run_(std::move(run)), open_spool_(std::move(open_spool)), options_(options) {
  thread_ = std::thread([this] { loop(); });
}

MlflowSender::~MlflowSender() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    give_up_at_ = Clock::now();
  }
  changed_.notify_all();
  std::lock_guard join(join_mutex_);
  if (thread_.joinable()) thread_.join();
}

std::chrono::milliseconds MlflowSender::retryBudget() const {
  std::chrono::milliseconds total{0};
  for (int retry = 1; retry <= options_.retry.max_retries; ++retry) {
    MlflowRetry no_jitter = options_.retry;
    no_jitter.jitter = 0;
    total += no_jitter.delayBefore(retry) + std::chrono::milliseconds(static_cast<std::int64_t>(options_.retry.jitter * 1000));
  }
  return total;
}

void MlflowSender::push(Item item) {
  {
    std::lock_guard lock(mutex_);
    queued_metrics_ += item.metrics.size();
    queue_.push_back(std::move(item));
  }
  changed_.notify_all();
}

void MlflowSender::metrics(std::vector<MlflowMetric> values) {
  if (!values.empty()) push({.kind = Item::Kind::kMetrics, .metrics = std::move(values)});
}
void MlflowSender::params(std::vector<std::pair<std::string, std::string>> params) {
  if (!params.empty()) push({.kind = Item::Kind::kParams, .params = std::move(params)});
}
void MlflowSender::artifact(std::string file, std::string artifact_dir) {
  push({.kind = Item::Kind::kArtifact, .file = std::move(file), .artifact_dir = std::move(artifact_dir)});
}

void MlflowSender::config(std::string yaml) { push({.kind = Item::Kind::kConfig, .content = std::move(yaml)}); }

void MlflowSender::flush(Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  changed_.wait_until(lock, deadline, [&] { return queue_.empty() && !busy_; });
}

void MlflowSender::finish(MlflowRunStatus status, Clock::time_point deadline) {
  std::lock_guard join(join_mutex_);
  if (!thread_.joinable()) return;  // finished already (a signal's end came first)
  {
    std::lock_guard lock(mutex_);
    queue_.push_back({.kind = Item::Kind::kEnd, .status = status});
    stopping_ = true;
    give_up_at_ = deadline;
  }
  changed_.notify_all();
  thread_.join();
}

void MlflowSender::loop() {
  for (;;) {
    Item item;
    bool overflow = false, late = false;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      overflow = queued_metrics_ >= options_.capacity;
      late = Clock::now() >= give_up_at_;
      item = std::move(queue_.front());
      queue_.pop_front();
      // Consecutive metric items travel together, up to a request's worth.
      while (item.kind == Item::Kind::kMetrics && !queue_.empty() && queue_.front().kind == Item::Kind::kMetrics &&
             item.metrics.size() + queue_.front().metrics.size() <= kMetricsPerBatch) {
        item.metrics.insert(item.metrics.end(), queue_.front().metrics.begin(), queue_.front().metrics.end());
        queue_.pop_front();
      }
      queued_metrics_ -= item.metrics.size();
      busy_ = true;
    }
    std::string why;
    if (!spooling_) {
      if (overflow)
        startSpooling(fmt::format("{} metric values waited to be sent", options_.capacity));
      else if (late)
        startSpooling("the run ended before the server took all its values");
      else if (!sendWithRetries(item, &why))
        startSpooling(why, /*server_down=*/true);
      else
        item.kind = Item::Kind::kNone;  // sent
    } else if (item.kind == Item::Kind::kEnd && !server_down_) {
      // The server answers but the values went to the spool: the run's
      // status still goes to the server (one try past the deadline).
      sendWithRetries(item, &why);
    }
    if (spooling_ && item.kind != Item::Kind::kNone) spool(item);
    {
      std::lock_guard lock(mutex_);
      busy_ = false;
    }
    changed_.notify_all();
  }
}

void MlflowSender::send(const Item& item) const {
  switch (item.kind) {
    case Item::Kind::kMetrics:
      server_.logBatch(run_.run_id,
                       {item.metrics.begin(), item.metrics.begin() +
                                                  static_cast<std::ptrdiff_t>(std::min(kMetricsPerBatch, item.metrics.size()))},
                       {});
      return;
    case Item::Kind::kParams:
      server_.logBatch(run_.run_id, {},
                       {item.params.begin(), item.params.begin() +
                                                 static_cast<std::ptrdiff_t>(std::min(kParamsPerBatch, item.params.size()))});
      return;
    case Item::Kind::kArtifact: server_.uploadArtifact(run_, item.artifact_dir, item.file); return;
    case Item::Kind::kConfig: server_.uploadText(run_, "config.yaml", item.content); return;
    case Item::Kind::kEnd: server_.updateRun(run_.run_id, item.status, nowMillis()); return;
    case Item::Kind::kNone: return;
  }
}

bool MlflowSender::sendWithRetries(Item& item, std::string* why) {
  for (;;) {
    int retry = 0;
    for (;;) {
      try {
        send(item);
        if (failing_) {
          spdlog::info("MLFlowLogger: the tracking server {} answers again; nothing was lost", server_.uri());
          failing_ = false;
        }
        break;
      } catch (const MlflowError& e) {
        Clock::time_point give_up_at;
        {
          std::lock_guard lock(mutex_);
          give_up_at = give_up_at_;
        }
        const auto delay = options_.retry.delayBefore(retry + 1);
        if (!e.retryable() || retry >= options_.retry.max_retries || Clock::now() + delay > give_up_at) {
          *why = e.retryable() ? fmt::format("{} (tried {} times)", e.what(), retry + 1) : e.what();
          return false;
        }
        if (!failing_ && !warned_retrying_)
          spdlog::warn("MLFlowLogger: {}; retrying for up to {:.1f} s (MLFLOW_HTTP_REQUEST_MAX_RETRIES, "
                       "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR)",
                       e.what(), static_cast<double>(retryBudget().count()) / 1000);
        warned_retrying_ = true;
        failing_ = true;
        ++retry;
        std::unique_lock lock(mutex_);
        const auto wake = Clock::now() + delay;
        changed_.wait_until(lock, wake, [&] { return Clock::now() >= give_up_at_; });
      }
    }
    // Sent: a metrics or params item may have more than one request's worth.
    if (item.kind == Item::Kind::kMetrics && item.metrics.size() > kMetricsPerBatch) {
      item.metrics.erase(item.metrics.begin(), item.metrics.begin() + kMetricsPerBatch);
    } else if (item.kind == Item::Kind::kParams && item.params.size() > kParamsPerBatch) {
      item.params.erase(item.params.begin(), item.params.begin() + kParamsPerBatch);
    } else {
      item.metrics.clear();
      item.params.clear();
      return true;
    }
  }
}

void MlflowSender::startSpooling(const std::string& why, bool server_down) {
  spool_ = &open_spool_();
  spooling_ = true;
  server_down_ = server_down;
  spdlog::warn("MLFlowLogger: giving up on the tracking server {}: {}. The run goes on: its values, those not sent "
               "included, go to the local file store {} (run {}); `mlflow ui --backend-store-uri {}` shows them",
               server_.uri(), why, spool_->storeDir(), run_.run_id, spool_->storeDir());
}

void MlflowSender::spool(const Item& item) {
  switch (item.kind) {
    case Item::Kind::kMetrics: spool_->appendMetrics(item.metrics); return;
    case Item::Kind::kParams: spool_->writeParams(item.params); return;
    case Item::Kind::kArtifact: spool_->copyArtifact(item.file, item.artifact_dir); return;
    case Item::Kind::kConfig: spool_->writeConfig(item.content); return;
    case Item::Kind::kEnd: spool_->endRun(item.status); return;
    case Item::Kind::kNone: return;
  }
}

}  // namespace hpu::core
