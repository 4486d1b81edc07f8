// The local launcher (Lightning's subprocess launcher): with trainer.devices
// = N on a node, the process the user started is local rank 0 and starts
// N-1 copies of itself (/proc/self/exe, the same argv) as local ranks 1..N-1.
// An elastic agent (elastic_agent.h) is no rank itself and starts all N.
//
// Workers get the launcher's environment plus LOCAL_RANK=i, NODE_RANK,
// WORLD_SIZE, MASTER_ADDR and MASTER_PORT (a free port is picked when none
// was given), and, on a single node without a job token, HPU_JOB_TOKEN set
// to a random per-launch token. They are never given secrets on argv.
// Their stderr comes through a pipe: the launcher forwards it line by line
// to its own stderr and keeps each worker's last lines for its failure.
// With LaunchOptions::workersReportErrors, each worker also gets
// HPU_WORKER_ERROR_FILE, a file of the launcher's private temporary folder
// where a failing worker writes its error (reportErrorToLauncher) instead of
// printing it, so that the launching process reports the job's failure once:
// the root cause first, with the ranks that share it (workerExits()).
//
// Supervision (a thread of the launcher):
//  - a worker that exits non-zero or dies of a signal is the job's first
//    failure: the others get SIGTERM, and SIGKILL after terminationGrace;
//    onWorkerFailure (if set) is called, then rank 0 has exitGrace to reach
//    waitWorkers(), which returns the failure's exit code (128 + signal for
//    a signal); if it does not, the launcher process exits with that code;
//  - SIGINT / SIGTERM sent to the launcher are forwarded to every worker;
//    once they exited (or were killed after terminationGrace) the launcher
//    dies of the same signal;
//  - workers die with the launcher: each sets PR_SET_PDEATHSIG(SIGKILL)
//    bound to the supervising thread and exits at once if the launcher is
//    already gone (getppid() check after setting it);
//  - destroying the LocalLauncher (rank 0 failing and unwinding) stops the
//    workers the same way.
//
// Thread-safety: one LocalLauncher per process at a time (it owns the
// SIGINT/SIGTERM handlers, the one process-global state of comm/); its
// methods may be called from any thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hpu/comm/cluster_info.h"
#include "hpu/env/environment.h"

namespace hpu::comm {

struct WorkerFailure {
  int localRank = 0;
  int globalRank = 0;
  pid_t pid = 0;
  int exitCode = 0;         // the exit status, or 128 + signal
  std::string description;  // "local rank 2 (pid 4242) exited with code 3"
  std::vector<std::string> lastLines{};  // the end of its stderr, oldest first
};

// A failing worker's own account of its error (reportErrorToLauncher).
struct WorkerErrorReport {
  int exitCode = 1;
  // The error is a consequence of another rank's (a peer lost, the process
  // group aborted), not a cause of its own.
  bool secondary = false;
  std::vector<std::string> lines{};  // the message, one problem a line
};

// How a worker ended.
struct WorkerExit {
  int localRank = 0;
  int globalRank = 0;
  int exitCode = 0;         // the exit status, or 128 + signal
  std::string description;  // "local rank 2 (pid 4242) exited with code 3"
  // It exited after the launcher began stopping the workers (another
  // worker's failure, or the launcher's own).
  bool stopped = false;
  std::optional<WorkerErrorReport> report{};  // what it reported, if it did
};

// The variable naming a worker's error file.
inline constexpr const char* kWorkerErrorFileVariable = "HPU_WORKER_ERROR_FILE";

// In a worker started with workersReportErrors: writes `report` to the
// file `env` names (kWorkerErrorFileVariable). Returns false when `env`
// names none or the file cannot be written; the caller prints the error then.
bool reportErrorToLauncher(const Environment& env, const WorkerErrorReport& report);

struct LaunchOptions {
  ClusterInfo cluster;  // this process's resolved place (local rank 0, not created externally)
  Environment env;  // the workers' base environment: this process's, as main() took it
  std::vector<std::string> argv{};  // empty: this process's own argv (/proc/self/cmdline)
  std::string executable = "/proc/self/exe";
  // 1: this process is local rank 0 and starts the others; 0: it is no rank
  // (an elastic agent) and starts local ranks 0..N-1.
  int firstLocalRank = 1;
  std::chrono::milliseconds terminationGrace{5'000};  // SIGTERM -> SIGKILL
  std::chrono::milliseconds exitGrace{10'000};        // worker failure -> launcher exit
  // Called on the supervising thread after the workers were stopped, e.g.
  // to abort rank 0's process group so that it stops at once.
  std::function<void(const WorkerFailure&)> onWorkerFailure{};
  // Workers write their errors to files (HPU_WORKER_ERROR_FILE) for this
  // process to report (workerExits()), and the first failure is logged at
  // debug level only.
  bool workersReportErrors = false;
};

class LocalLauncher {
 public:
  using Clock = std::chrono::steady_clock;

  virtual ~LocalLauncher() = default;
  // The environment every local rank runs with (the workers' base env plus
  // the picked MASTER_PORT and generated HPU_JOB_TOKEN); rank 0 resolves its
  // ClusterInfo and job token from it.
  virtual const Environment& sharedEnv() const = 0;
  virtual std::vector<pid_t> workerPids() const = 0;
  virtual std::optional<WorkerFailure> firstFailure() const = 0;
  // The workers that exited so far, in the order they did, with the errors
  // they reported.
  virtual std::vector<WorkerExit> workerExits() const = 0;
  // Returns once every worker exited: 0, or the first failure's exit code.
  // Throws CommTimeoutError at `deadline` (the workers keep running).
  virtual int waitWorkers(Clock::time_point deadline) = 0;
};

// Starts local ranks 1..localWorldSize-1. Throws LaunchError when a worker
// cannot be started (nothing is left running then).
// REQUIRES: cluster.localRank == 0, !cluster.createsProcessesExternally,
// firstLocalRank 0 or 1, at least one worker to start (cluster.localWorldSize
// > firstLocalRank), and no other LocalLauncher alive.
std::unique_ptr<LocalLauncher> launchLocalWorkers(const LaunchOptions& options);

}  // namespace hpu::comm
