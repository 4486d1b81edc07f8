#include "thread_team.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

namespace hpu::device::detail {
namespace {

std::int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

constexpr std::uint64_t kField = (std::uint64_t{1} << 24) - 1;

std::uint64_t rangeWord(std::uint32_t generation, std::int64_t begin, std::int64_t end) {
  return std::uint64_t{generation & 0xFFFFu} << 48 | static_cast<std::uint64_t>(begin) << 24 |
         static_cast<std::uint64_t>(end);
}

}  // namespace

ThreadTeam::ThreadTeam(int threads) : ranges_(static_cast<std::size_t>(threads)) {
  workers_.reserve(static_cast<std::size_t>(threads - 1));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { workerLoop(i); });
}

ThreadTeam::~ThreadTeam() {
  {
    std::lock_guard lock(sleep_mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (std::thread& w : workers_) w.join();
}

std::optional<TeamRun> ThreadTeam::run(std::int64_t count, TaskRef task) {
  if (count >= kMaxTasks || busy_.exchange(true, std::memory_order_acquire)) return std::nullopt;
  std::uint32_t g = ++last_generation_;
  if (g == 0) g = last_generation_ = 1;  // 0 is "no job"
  task_ = task;
  error_ = nullptr;
  done_.store(0, std::memory_order_relaxed);
  worker_task_ns_.store(0, std::memory_order_relaxed);
  const std::int64_t n = threads();
  for (std::int64_t r = 0; r < n; ++r)
    ranges_[static_cast<std::size_t>(r)].word.store(rangeWord(g, r * count / n, (r + 1) * count / n),
                                                    std::memory_order_release);
  generation_.store(g, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard lock(sleep_mutex_);
    wake_.notify_all();
  }

  TeamRun out;
  out.caller_task_ns = claimTasks(g, 0);
  // Only tasks other threads have claimed (and are running) remain.
  const std::int64_t wait_start = nowNs();
  for (std::int64_t spins = 0; done_.load(std::memory_order_acquire) != count; ++spins) {
    if (spins % 64 == 63 && nowNs() - wait_start > kCallerSpinNs)
      sched_yield();  // the worker may be preempted on this core
    else
      cpuRelax();
  }
  out.task_ns = out.caller_task_ns + worker_task_ns_.load(std::memory_order_relaxed);
  {
    std::lock_guard lock(error_mutex_);
    out.error = error_;
  }
  busy_.store(false, std::memory_order_release);
  return out;
}

bool& inTeamTask() {
  thread_local bool in_task = false;
  return in_task;
}

std::int64_t ThreadTeam::take(std::uint32_t generation, int r, bool front) {
  std::atomic<std::uint64_t>& word = ranges_[static_cast<std::size_t>(r)].word;
  std::uint64_t cur = word.load(std::memory_order_acquire);
  for (;;) {
    const std::int64_t begin = static_cast<std::int64_t>(cur >> 24 & kField);
    const std::int64_t end = static_cast<std::int64_t>(cur & kField);
    if (cur >> 48 != (generation & 0xFFFFu) || begin >= end) return -1;
    const std::uint64_t next = front ? rangeWord(generation, begin + 1, end) : rangeWord(generation, begin, end - 1);
    if (word.compare_exchange_weak(cur, next, std::memory_order_acq_rel, std::memory_order_acquire))
      return front ? begin : end - 1;
  }
}

std::int64_t ThreadTeam::claimTasks(std::uint32_t g, int self) {
  const int n = threads();
  std::int64_t ns = 0;
  for (;;) {
    // Own range from the front, then the others' from the back.
    std::int64_t i = take(g, self, true);
    for (int d = 1; i < 0 && d < n; ++d) i = take(g, (self + d) % n, false);
    if (i < 0) return ns;
    // Task i of job g is ours; the job stays alive until it is done.
    const std::int64_t start = nowNs();
    try {
      task_.call(task_.fn, i);
    } catch (...) {
      std::lock_guard lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
    const std::int64_t task_ns = nowNs() - start;
    ns += task_ns;
    if (self != 0) worker_task_ns_.fetch_add(task_ns, std::memory_order_relaxed);
    done_.fetch_add(1, std::memory_order_release);
  }
}

void ThreadTeam::workerLoop(int self) {
  inTeamTask() = true;  // parallel calls from its tasks run inline
  // Generation 0 is the team's start: a worker that starts late still sees
  // every later job, and the stop.
  std::uint32_t seen = 0;
  for (;;) {
    std::uint32_t g = generation_.load(std::memory_order_acquire);
    const std::int64_t spin_start = nowNs();
    for (std::int64_t spins = 0; g == seen; ++spins, g = generation_.load(std::memory_order_acquire)) {
      if (spins % 64 == 63 && nowNs() - spin_start > kSpinNs) {
        std::unique_lock lock(sleep_mutex_);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        wake_.wait(lock, [&] { return generation_.load(std::memory_order_seq_cst) != seen; });
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      } else if (spins % 64 == 63) {
        sched_yield();  // to a caller this worker may have displaced
      } else {
        cpuRelax();
      }
    }
    if (stop_.load()) return;
    seen = g;
    claimTasks(g, self);
  }
}

double ThreadTeam::calibrateHandoffNs() {
  constexpr int kWarmup = 8, kTrials = 32;
  constexpr std::int64_t kTaskNs = 3'000;
  std::vector<double> samples;
  const auto busy = [](const void*, std::int64_t) {
    const std::int64_t until = nowNs() + kTaskNs;
    while (nowNs() < until) cpuRelax();
  };
  for (int i = 0; i < kWarmup + kTrials; ++i) {
    const std::int64_t start = nowNs();
    const std::optional<TeamRun> r = run(threads(), {busy, nullptr});
    const double overhead = static_cast<double>(nowNs() - start - r->caller_task_ns);
    if (i >= kWarmup) samples.push_back(std::max(0.0, overhead));
  }
  std::nth_element(samples.begin(), samples.begin() + kTrials / 2, samples.end());
  return samples[kTrials / 2];
}

}  // namespace hpu::device::detail
