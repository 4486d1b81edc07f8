#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "../check.h"
#include "../duration_text.h"
#include "../rank_list.h"
#include "../zmq/net.h"
#include "hpu/comm/errors.h"
#include "hpu/comm/free_port.h"
#include "hpu/comm/job_token.h"
#include "hpu/comm/launcher.h"
#include "signal_forwarding.h"
#include "spawn.h"
#include "worker_error_file.h"
#include "worker_output.h"

namespace hpu::comm {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
constexpr milliseconds kReapInterval{20};

int exitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string describeExit(int localRank, pid_t pid, int status) {
  if (WIFSIGNALED(status)) {
    return fmt::format("local rank {} (pid {}) was killed by signal {} ({})", localRank, pid, WTERMSIG(status),
                       ::strsignal(WTERMSIG(status)));
  }
  return fmt::format("local rank {} (pid {}) exited with code {}", localRank, pid, exitCodeOf(status));
}

class SubprocessLauncher final : public LocalLauncher {
 public:
  explicit SubprocessLauncher(const LaunchOptions& options) : options_(options) {
    const ClusterInfo& c = options.cluster;
    HPU_COMM_CHECK(c.localRank == 0 && !c.createsProcessesExternally, 
                   "launchLocalWorkers runs on local rank 0 of a node whose processes it creates");
    HPU_COMM_CHECK((options.firstLocalRank == 0 || options.firstLocalRank == 1) &&
                       c.localWorldSize > options.firstLocalRank,
                   "launchLocalWorkers starts local ranks firstLocalRank (0 or 1) .. localWorldSize-1, at least one");
    sharedEnv_ = options.env;
    sharedEnv_.set("MASTER_ADDR", c.masterAddr);
    sharedEnv_.set("MASTER_PORT", std::to_string(c.masterPort != 0 ? c.masterPort : pickFreePort(c.masterAddr)));
    sharedEnv_.set("NODE_RANK", std::to_string(c.nodeRank));
    sharedEnv_.set("WORLD_SIZE", std::to_string(c.worldSize));
    if (c.numNodes == 1 && JobToken::fromEnv(options.env).empty()) {
      sharedEnv_.set("HPU_JOB_TOKEN", JobToken::generate().secretForChildEnvironment());
    }
    sharedEnv_.unset(kWorkerErrorFileVariable);  // each worker gets its own, or none
    if (options.workersReportErrors) errorFolder_.emplace();
    std::promise<void> started;
    auto startedFuture = started.get_future();
    supervisor_ = std::thread([this, &started] { supervise(started); });
    try {
      startedFuture.get();
    } catch (...) {
      supervisor_.join();
      throw;
    }
  }

  ~SubprocessLauncher() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      beginTermination(SIGTERM);
    }
    changed_.notify_all();
    supervisor_.join();
  }

  const Environment& sharedEnv() const override { return sharedEnv_; }

  std::vector<pid_t> workerPids() const override {
    std::lock_guard lock(mutex_);
    std::vector<pid_t> pids;
    for (const auto& w : workers_) pids.push_back(w.pid);
    return pids;
  }

  std::optional<WorkerFailure> firstFailure() const override {
    std::lock_guard lock(mutex_);
    return failure_;
  }

  std::vector<WorkerExit> workerExits() const override {
    std::lock_guard lock(mutex_);
    return exits_;
  }

  int waitWorkers(Clock::time_point deadline) override {
    std::unique_lock lock(mutex_);
    ownerWaiting_ = true;
    changed_.notify_all();
    if (!changed_.wait_until(lock, deadline, [&] { return allExited(); })) {
      std::vector<int> running;
      for (const auto& w : workers_) {
        if (!w.exited) running.push_back(w.localRank);
      }
      throw CommTimeoutError(fmt::format("local ranks {} are still running at the deadline",
                                         detail::formatRankList(running)));
    }
    return failure_ ? failure_->exitCode : 0;
  }

 private:
  struct Worker {
    int localRank;
    pid_t pid;
    std::unique_ptr<detail::WorkerOutput> output;  // its stderr
    bool exited = false;
  };

  void supervise(std::promise<void>& started) {
    // Workers are forked here so that PR_SET_PDEATHSIG ties them to this
    // thread, which lives exactly as long as they may.
    try {
      spawnAll();
    } catch (...) {
      {
        std::lock_guard lock(mutex_);
        beginTermination(SIGKILL);
      }
      reapUntilAllExited();
      started.set_exception(std::current_exception());
      return;
    }
    started.set_value();
    std::unique_lock lock(mutex_);
    std::optional<Clock::time_point> exitDeadline;
    for (;;) {
      lock.unlock();
      reap();
      lock.lock();
      const auto now = Clock::now();
      if (const int signal = forwarding_.pendingSignal(); signal != 0 && !terminating_) {
        beginTermination(0);  // the workers already got the signal itself
      }
      if (stopDeadline_ && !terminating_ && now >= *stopDeadline_) beginTermination(SIGTERM);
      if (terminating_ && now >= killDeadline_) signalRunning(SIGKILL);
      if (allExited()) {
        if (const int signal = forwarding_.pendingSignal(); signal != 0) forwarding_.dieOf(signal);
        if (stopping_) return;
        if (failure_ && !failureHandled_) {
          failureHandled_ = true;
          exitDeadline = now + options_.exitGrace;
          lock.unlock();
          if (options_.onWorkerFailure) options_.onWorkerFailure(*failure_);
          lock.lock();
        }
        if (exitDeadline && !ownerWaiting_ && Clock::now() >= *exitDeadline) {
          // This process reports for its workers: say what the failed one did.
          for (const WorkerExit& e : exits_)
            if (e.globalRank == failure_->globalRank && e.report)
              for (const std::string& line : e.report->lines) spdlog::error("rank {}: {}", e.globalRank, line);
          spdlog::error("rank {}: {}; rank 0 did not stop within {}; exiting with code {}", options_.cluster.globalRank,
                        failure_->description, detail::durationText(options_.exitGrace), failure_->exitCode);
          std::_Exit(failure_->exitCode);
        }
        if (!exitDeadline) return;  // every worker finished cleanly
      }
      lock.unlock();
      pumpOutput();
      lock.lock();
    }
  }

  // Forwards the workers' stderr; returns when some came or after kReapInterval.
  void pumpOutput() {
    std::vector<pollfd> fds;
    std::vector<detail::WorkerOutput*> outputs;
    for (auto& w : workers_) {
      if (w.output && w.output->fd() >= 0) {
        fds.push_back({w.output->fd(), POLLIN, 0});
        outputs.push_back(w.output.get());
      }
    }
    if (fds.empty()) {
      std::this_thread::sleep_for(kReapInterval);
      return;
    }
    if (::poll(fds.data(), fds.size(), static_cast<int>(kReapInterval.count())) <= 0) return;
    for (std::size_t i = 0; i < fds.size(); ++i)
      if (fds[i].revents != 0) outputs[i]->pump();
  }

  void spawnAll() {
    const std::vector<std::string> argv = options_.argv.empty() ? detail::currentArgv() : options_.argv;
    for (int localRank = options_.firstLocalRank; localRank < options_.cluster.localWorldSize; ++localRank) {
      Environment env = sharedEnv_;
      env.set("LOCAL_RANK", std::to_string(localRank));
      if (errorFolder_) env.set(kWorkerErrorFileVariable, errorFolder_->fileFor(localRank).string());
      int pipeFds[2];
      if (::pipe2(pipeFds, O_CLOEXEC) != 0)
        throw LaunchError(fmt::format("cannot create a pipe for a worker's output: {}", std::strerror(errno)));
      auto output = std::make_unique<detail::WorkerOutput>(pipeFds[0]);
      detail::SpawnRequest request{options_.executable, argv, env.entries(), pipeFds[1]};
      pid_t pid = -1;
      try {
        pid = detail::spawnWorker(request);
      } catch (...) {
        ::close(pipeFds[1]);
        throw;
      }
      ::close(pipeFds[1]);
      std::lock_guard lock(mutex_);
      workers_.push_back({localRank, pid, std::move(output)});
      forwarding_.add(pid);
    }
  }

  // Collects exited workers; the first non-zero exit is the failure.
  void reap() {
    std::lock_guard lock(mutex_);
    for (auto& w : workers_) {
      if (w.exited) continue;
      int status = 0;
      const pid_t done = ::waitpid(w.pid, &status, WNOHANG);
      if (done != w.pid) continue;
      w.exited = true;
      forwarding_.remove(w.pid);
      w.output->drain();
      const int code = exitCodeOf(status);
      const ClusterInfo& c = options_.cluster;
      const int globalRank = c.nodeRank * c.localWorldSize + w.localRank;
      WorkerExit& exit = exits_.emplace_back(WorkerExit{w.localRank, globalRank, code,
                                                        describeExit(w.localRank, w.pid, status),
                                                        terminating_ || stopping_});
      if (errorFolder_ && code != 0) exit.report = detail::readWorkerErrorFile(errorFolder_->fileFor(w.localRank));
      if (code == 0 || failure_ || stopping_ || forwarding_.pendingSignal() != 0) continue;
      failure_ = WorkerFailure{w.localRank, globalRank, w.pid, code, exit.description, w.output->lastLines()};
      // An elastic agent reports the failure itself, with what it does next;
      // with error reports, rank 0 reports the job's failure once, at its end.
      if (options_.firstLocalRank == 1)
        spdlog::log(options_.workersReportErrors ? spdlog::level::debug : spdlog::level::err,
                    "rank {}: {}; stopping the other local ranks", c.globalRank, failure_->description);
      // A worker that reported its error aborted its process group, so the
      // others stop at their next collective and report theirs: they have
      // terminationGrace for it before SIGTERM.
      if (exit.report) {
        stopDeadline_ = Clock::now() + options_.terminationGrace;
      } else {
        beginTermination(SIGTERM);
      }
    }
    changed_.notify_all();
  }

  void reapUntilAllExited() {
    for (;;) {
      reap();
      {
        std::lock_guard lock(mutex_);
        if (allExited()) return;
        if (Clock::now() >= killDeadline_) signalRunning(SIGKILL);
      }
      std::this_thread::sleep_for(kReapInterval);
    }
  }

  // REQUIRES: mutex_ held. Sends `signal` (0: none) now and SIGKILL after the grace.
  void beginTermination(int signal) {
    if (!terminating_) {
      terminating_ = true;
      killDeadline_ = Clock::now() + (signal == SIGKILL ? milliseconds(0) : options_.terminationGrace);
    }
    if (signal != 0) signalRunning(signal);
  }

  void signalRunning(int signal) {
    for (const auto& w : workers_) {
      if (!w.exited) ::kill(w.pid, signal);
    }
  }

  bool allExited() const {
    for (const auto& w : workers_) {
      if (!w.exited) return false;
    }
    return true;
  }

  const LaunchOptions options_;
  Environment sharedEnv_;
  detail::SignalForwarding forwarding_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<detail::WorkerErrorFolder> errorFolder_;  // with workersReportErrors
  std::vector<Worker> workers_;
  std::vector<WorkerExit> exits_;
  std::optional<WorkerFailure> failure_;
  bool failureHandled_ = false;
  bool terminating_ = false;
  bool stopping_ = false;
  bool ownerWaiting_ = false;
  Clock::time_point killDeadline_;
  std::optional<Clock::time_point> stopDeadline_;  // SIGTERM then, after a reported failure
  std::thread supervisor_;
};

}  // namespace

std::unique_ptr<LocalLauncher> launchLocalWorkers(const LaunchOptions& options) {
  return std::make_unique<SubprocessLauncher>(options);
}

}  // namespace hpu::comm
