// The intra-op team behind parallelTasks (threading.h): the calling thread
// and threads - 1 workers share one job at a time. A job's tasks are dealt
// in contiguous ranges, one per thread (the caller is thread 0): a thread
// runs its own range front to back, then takes tasks from the back of the
// others' ranges, so a preempted or late thread holds up nothing. When no
// thread is late, task i of a job of n tasks runs on the same thread in
// every job; the kernels deal rows in order (a GEMM's row blocks, an
// elementwise loop's ranges), so a thread mostly reads the rows it wrote in
// the previous kernel, from its own core's caches. (With one shared counter
// the rows a thread got alternated between kernels, and every kernel read
// the other core's writes.)
//
// A job is published under a new generation number that every claim checks,
// so a worker that wakes late, after its job is done, claims nothing of the
// next one by mistake; a claimed task keeps its job (and the caller's task
// reference) alive, since the caller returns only when every task is done.
//
// After its last task a worker spins for kSpinNs, then sleeps on a
// condition variable until the next job; the caller wakes it only when some
// sleep. (Polling longer, even yielding between polls, cost the calling
// thread time slices on a busy host: a polling thread stays runnable.)
// While it spins, a worker yields its core every microsecond or so: on a
// host whose other cores are busy, the kernel often runs a woken worker on
// its caller's core in the caller's place, and a worker spinning there
// after the job kept the caller from the job's end (64-256 us stalls in a
// third of the parallel calls of an MLP step at batch 64, against a busy
// loop on the other core; none with the yields). Where the core has
// nothing else to run, a yield returns at once.
//
// Thread-safety: run() may be called from any thread; while one caller has
// the team, others get nullopt (and run their tasks themselves).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "hpu/device/threading.h"

namespace hpu::device::detail {

struct TeamRun {
  std::int64_t task_ns = 0;         // inside tasks, every thread
  std::int64_t caller_task_ns = 0;  // inside tasks, the calling thread
  std::exception_ptr error;         // the first exception a task threw
};

// Whether this thread is running a task (or is a worker): parallel calls
// it makes then run inline.
bool& inTeamTask();

class ThreadTeam {
 public:
  // How long a worker spins for the next job before it sleeps: longer than
  // the host work between a step's kernels, so that a step's first kernel
  // does not wait for a worker to wake. The MLP's step at batch 256 has
  // 40-60 us of host work between its optimizer step and its next batch;
  // with 50 us the worker slept there about every step (2 threads: 128,871
  // samples/s [115,206..139,767] against 137,214 [119,890..152,082] with
  // 200 us, 8 interleaved rounds; beside a busy loop 0.99x, both above one
  // thread).
  static constexpr std::int64_t kSpinNs = 200'000;
  // How long a caller waits for the job's last tasks before it yields its
  // core between polls (a worker it waits for may be preempted there).
  static constexpr std::int64_t kCallerSpinNs = 50'000;
  static constexpr std::int64_t kMaxTasks = std::int64_t{1} << 24;

  explicit ThreadTeam(int threads);
  ~ThreadTeam();
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs task(0 .. count-1) on the team, the caller taking part; nullopt
  // (nothing run) when another caller has the team, or for kMaxTasks tasks
  // or more.
  std::optional<TeamRun> run(std::int64_t count, TaskRef task);

  // The caller's time outside its tasks in a run of two tasks of a few
  // microseconds each, median of several: the hand-off cost of an idle host.
  double calibrateHandoffNs();

 private:
  void workerLoop(int self);
  // Claims and runs tasks of job `generation` until none are left, its own
  // range's first (thread `self`: 0 the caller, w + 1 worker w); returns the
  // time spent inside them (a worker also adds it to worker_task_ns_).
  std::int64_t claimTasks(std::uint32_t generation, int self);
  // The next task of range `r` for job `generation`: from its front
  // (`front`) or its back; -1 when the range is empty or of another job.
  std::int64_t take(std::uint32_t generation, int r, bool front);

  std::vector<std::thread> workers_;
  std::atomic<bool> busy_{false};  // a caller has the team
  std::uint32_t last_generation_ = 0;
  TaskRef task_{};
  // One thread's range of the current job's tasks: the generation's low 16
  // bits << 48 | first unclaimed task << 24 | end.
  struct alignas(64) Range {
    std::atomic<std::uint64_t> word{0};
  };
  std::vector<Range> ranges_;
  alignas(64) std::atomic<std::uint32_t> generation_{0};  // the current job
  std::atomic<int> sleepers_{0};                          // workers waiting on wake_
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
  std::atomic<bool> stop_{false};
  alignas(64) std::atomic<std::int64_t> done_{0};  // tasks of the current job finished
  std::atomic<std::int64_t> worker_task_ns_{0};    // of the current job
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace hpu::device::detail
