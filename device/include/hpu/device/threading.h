// Intra-op parallelism: how many threads one kernel (GEMM, convolution, a
// large elementwise loop) may use, and the loops that share a kernel's work
// among them.
//
// The threads are this process's intra-op team: the calling thread plus
// intraOpThreads() - 1 workers. A parallel call hands its tasks out one at a
// time to whichever thread is free, the caller included, so a worker the
// host does not schedule simply takes none. Workers spin for a short while
// after their last task (the next kernel usually follows within
// microseconds), then sleep until woken.
//
// Each call site is a ParallelSite that measures its own costs, per unit of
// its work (elements, flops): run serially, and, run on the team, the
// caller's share. Every parallel call also measures the site's hand-off
// cost: the caller's time outside its own tasks (publishing the job, waking
// workers, waiting for the last worker's task); until it has, the team's,
// calibrated when the team starts, stands in. A site keeps these costs per
// problem size (its units and task count; the last few sizes), since one
// site can serve problems whose costs per unit differ severalfold (a CNN's
// one-channel first convolution and its second); a size not measured yet
// starts from the site's serial cost and hand-off over every size, and
// assumes the team divides the serial time. A
// call runs on the team only when its predicted time there (share +
// hand-off) beats its predicted serial time by a margin; now and then a
// call runs the other way, so that both stay measured. On a busy host,
// where workers get preempted mid-task, or where sharing a loop costs more
// in cache traffic than it saves, the measured costs send calls back to
// one thread. Which thread runs a task never changes a result: the caller
// fixes the tasks, not the thread count.
//
// Thread-safety: setIntraOpThreads() at start-up, before kernels run (and
// between kernels in tests). Parallel calls from several threads at once are
// safe: one of them gets the team, the others run on their own thread.
// Calls from inside a task run on the task's thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hpu::device {

// cores / local_processes, at least 1.
int defaultIntraOpThreads(int local_processes);
// Sets the team to `threads` threads (the caller and threads - 1 workers).
// Before the first call: every core.
void setIntraOpThreads(int threads);
int intraOpThreads();
// The threads a parallel call made now can get: 1 inside a task and while
// steps run alone (stepEnded), else intraOpThreads(). For kernels whose
// work depends on how many threads share it.
int intraOpThreadsNow();

// A loop that may run on the team, with what it has learned about its cost.
// Define one per call site, with static storage:
//   static ParallelSite site("relu");
class ParallelSite {
 public:
  explicit ParallelSite(std::string_view name);
  ParallelSite(const ParallelSite&) = delete;
  ParallelSite& operator=(const ParallelSite&) = delete;
  const std::string& name() const { return name_; }

 private:
  friend struct ParallelAccess;
  // Learned costs (< 0: not measured yet): per unit of work on this thread
  // alone, and the caller's share of a parallel run; the hand-off of a
  // parallel run; and how many calls they decided.
  struct Costs {
    std::atomic<std::uint64_t> key{0};  // the problem size's; 0: a free slot
    std::atomic<double> serial_ns_per_unit{-1.0}, parallel_ns_per_unit{-1.0}, handoff_ns{-1.0};
    std::atomic<std::uint64_t> decisions{0};
  };
  static constexpr int kSizes = 8;
  std::string name_;
  Costs sizes_[kSizes];                       // the last kSizes problem sizes
  std::atomic<std::uint32_t> next_size_{0};   // the slot a new size takes
  Costs all_sizes_;                           // every call's samples (serial, hand-off)
  std::atomic<std::uint64_t> serial_calls_{0}, parallel_calls_{0};
  std::atomic<std::int64_t> task_ns_{0};
};

namespace detail {
// A non-owning reference to task(i).
struct TaskRef {
  void (*call)(const void* fn, std::int64_t i);
  const void* fn;
};
void runTasks(ParallelSite& site, std::int64_t count, double units, TaskRef task);
}  // namespace detail

// Runs task(i) for every i in [0, count), each once: on the team when
// `units` of the site's work (its own unit: elements, flops) pay for the
// hand-off, else in order on this thread. REQUIRES: tasks touch disjoint
// outputs; exceptions thrown by a task reach the caller (the first one).
template <class Task>
void parallelTasks(ParallelSite& site, std::int64_t count, double units, const Task& task) {
  detail::runTasks(site, count, units,
                   {[](const void* fn, std::int64_t i) { (*static_cast<const Task*>(fn))(i); }, &task});
}

// Runs every parallel call this thread makes on this thread alone, in
// order, from now on: for threads beside the one that trains (a data
// loader's workers), so that none holds the team while a kernel of the
// training thread waits for it.
void keepThreadOffTeam();

// body(begin, end) over consecutive ranges that cover [0, n), each a
// multiple of `grain` items long (but the last), `units` of work in all.
// For loops whose result does not depend on where ranges split.
template <class Body>
void parallelFor(ParallelSite& site, std::int64_t n, std::int64_t grain, double units, const Body& body) {
  if (n <= 0) return;
  const std::int64_t blocks = (n + grain - 1) / grain;
  const std::int64_t chunks = std::min<std::int64_t>(blocks, 4 * static_cast<std::int64_t>(intraOpThreads()));
  const std::int64_t per = (blocks + chunks - 1) / chunks * grain;
  parallelTasks(site, (n + per - 1) / per, units, [&](std::int64_t c) {
    const std::int64_t begin = c * per;
    body(begin, std::min(n, begin + per));
  });
}

// The end of a training (or evaluation) step of `kind` (its op count): the
// device's mark_step. Whole steps are timed, and now and then a few run on
// this thread alone; whichever mode runs steps faster is used for the
// following ones (step_tuner.h). A step that runs alone runs every parallel
// call on its calling thread. Results are the same bits either way.
void stepEnded(std::uint64_t kind);

// Totals since start, for benchmarks: task_ns sums the time every thread
// spent inside tasks (serial runs included); fork_join_ns the time callers
// of parallel runs spent outside their own tasks; steps (stepEnded) and
// those run alone.
struct ParallelStats {
  std::uint64_t serial_calls = 0, parallel_calls = 0;
  std::int64_t task_ns = 0, fork_join_ns = 0;
  std::uint64_t steps = 0, steps_alone = 0;
};
ParallelStats parallelStats();

// Each site's name and totals, in the order sites were first used.
std::vector<std::pair<std::string, ParallelStats>> parallelSiteStats();

// The hand-off cost (ns) a parallel call is currently charged.
double parallelHandoffNs();

// Test seam: while true, every call of two or more tasks goes to the team
// (when it is free), whatever the cost model says.
void setAlwaysParallelForTesting(bool always);

}  // namespace hpu::device
