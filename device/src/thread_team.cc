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

constexpr std::uint64_t kLow = 0xFFFFFFFFu;

}  // namespace

ThreadTeam::ThreadTeam(int threads) {
  workers_.reserve(static_cast<std::size_t>(threads - 1));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
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
  if (busy_.exchange(true, std::memory_order_acquire)) return std::nullopt;
  std::uint32_t g = ++last_generation_;
  if (g == 0) g = last_generation_ = 1;  // 0 is "no job"
  task_ = task;
  error_ = nullptr;
  done_.store(0, std::memory_order_relaxed);
  worker_task_ns_.store(0, std::memory_order_relaxed);
  bound_.store(std::uint64_t{g} << 32 | static_cast<std::uint64_t>(count), std::memory_order_relaxed);
  next_.store(std::uint64_t{g} << 32, std::memory_order_release);
  generation_.store(g, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard lock(sleep_mutex_);
    wake_.notify_all();
  }

  TeamRun out;
  out.caller_task_ns = claimTasks(g, false);
  // Only tasks other threads have claimed (and are running) remain.
  const std::int64_t wait_start = nowNs();
  for (std::int64_t spins = 0; done_.load(std::memory_order_acquire) != count; ++spins) {
    if (spins % 64 == 63 && nowNs() - wait_start > kSpinNs)
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

std::int64_t ThreadTeam::claimTasks(std::uint32_t g, bool worker) {
  std::int64_t ns = 0;
  for (;;) {
    const std::uint64_t bound = bound_.load(std::memory_order_acquire);
    if (bound >> 32 != g) return ns;
    std::uint64_t cur = next_.load(std::memory_order_acquire);
    do {
      if (cur >> 32 != g || (cur & kLow) >= (bound & kLow)) return ns;
    } while (!next_.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel, std::memory_order_acquire));
    // Task (cur & kLow) of job g is ours; the job stays alive until it is done.
    const std::int64_t start = nowNs();
    try {
      task_.call(task_.fn, static_cast<std::int64_t>(cur & kLow));
    } catch (...) {
      std::lock_guard lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
    const std::int64_t task_ns = nowNs() - start;
    ns += task_ns;
    if (worker) worker_task_ns_.fetch_add(task_ns, std::memory_order_relaxed);
    done_.fetch_add(1, std::memory_order_release);
  }
}

void ThreadTeam::workerLoop() {
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
    claimTasks(g, true);
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
