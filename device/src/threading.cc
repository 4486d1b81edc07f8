#include "hpu/device/threading.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "hpu/device/step_tuner.h"
#include "thread_team.h"

namespace hpu::device {

struct ParallelAccess {
  using Costs = ParallelSite::Costs;
  // The costs of the problem size `key` (never 0), claiming the oldest slot
  // for a size not seen lately. Concurrent callers may race on a slot; that
  // only blurs what it has learned.
  static Costs& of(ParallelSite& s, std::uint64_t key) {
    for (Costs& c : s.sizes_)
      if (c.key.load(std::memory_order_relaxed) == key) return c;
    Costs& c = s.sizes_[s.next_size_.fetch_add(1, std::memory_order_relaxed) % ParallelSite::kSizes];
    for (auto* v : {&c.serial_ns_per_unit, &c.parallel_ns_per_unit, &c.handoff_ns})
      v->store(-1.0, std::memory_order_relaxed);
    c.decisions.store(0, std::memory_order_relaxed);
    c.key.store(key, std::memory_order_relaxed);
    return c;
  }
  static Costs& allSizes(ParallelSite& s) { return s.all_sizes_; }
  static void count(ParallelSite& s, bool parallel, std::int64_t task_ns) {
    (parallel ? s.parallel_calls_ : s.serial_calls_).fetch_add(1, std::memory_order_relaxed);
    s.task_ns_.fetch_add(task_ns, std::memory_order_relaxed);
  }
  static ParallelStats stats(const ParallelSite& s) {
    return {s.serial_calls_.load(std::memory_order_relaxed), s.parallel_calls_.load(std::memory_order_relaxed),
            s.task_ns_.load(std::memory_order_relaxed), 0};
  }
};

namespace {

using detail::TeamRun;
using detail::ThreadTeam;

// A parallel call is predicted to take kMargin of the serial time or less,
// or it runs serially: the prediction leaves out what a hand-off does to
// the caches (outputs written on another core are read back on this one).
constexpr double kMargin = 0.9;
// Weight of a new sample in the learned costs (exponential moving averages).
// Timing noise only ever adds time (preemption, page faults, a cold cache),
// so a sample below the average moves it faster than one above.
constexpr double kLearnRate = 0.125, kLearnRateDown = 0.5;
// Now and then a call runs in the mode not chosen, so that both costs stay
// measured as the host's load changes, and one slow sample (a first call
// that faults its output in) cannot lock a site into the other mode: every
// kExploreEvery-th call when the two are predicted within kExploreBudget,
// and as much rarer as the predicted loss is larger, so that exploring is
// predicted to cost at most kExploreBudget of the site's time.
constexpr std::uint64_t kExploreEvery = 16;
constexpr double kExploreBudget = 0.03;

int g_threads = 0;  // 0: not set yet (every core)
std::atomic<bool> g_always_parallel{false};
std::mutex g_team_mutex;
std::unique_ptr<ThreadTeam> g_team;
std::atomic<ThreadTeam*> g_team_ptr{nullptr};

struct Costs {
  std::atomic<double> handoff_ns{0.0};
  std::atomic<std::int64_t> fork_join_ns{0};
};
Costs g_costs;

// The step-level choice (stepEnded).
struct Steps {
  std::mutex mutex;
  StepTuner tuner;
  std::int64_t last_end_ns = -1;
  std::uint64_t count = 0, alone = 0;
};
Steps& steps() {
  static Steps s;
  return s;
}
std::atomic<bool> g_steps_alone{false};

struct SiteList {
  std::mutex mutex;
  std::vector<const ParallelSite*> sites;
};
SiteList& siteList() {
  static SiteList list;
  return list;
}

int hardwareThreads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

void blend(std::atomic<double>& average, double sample) {
  const double old = average.load(std::memory_order_relaxed);
  const double rate = sample < old ? kLearnRateDown : kLearnRate;
  average.store(old < 0 ? sample : old + rate * (sample - old), std::memory_order_relaxed);
}

// The team of this process (nullptr with one thread), created on first use.
ThreadTeam* team() {
  if (ThreadTeam* t = g_team_ptr.load(std::memory_order_acquire)) return t;
  std::lock_guard lock(g_team_mutex);
  if (g_team == nullptr) {
    if (g_threads == 0) g_threads = hardwareThreads();
    if (g_threads == 1) return nullptr;
    g_team = std::make_unique<ThreadTeam>(g_threads);
    g_costs.handoff_ns.store(g_team->calibrateHandoffNs());
    g_team_ptr.store(g_team.get(), std::memory_order_release);
  }
  return g_team.get();
}

// A size's learned value, else the site's over every size (< 0: neither).
double learned(const std::atomic<double>& size, const std::atomic<double>& site) {
  const double v = size.load(std::memory_order_relaxed);
  return v >= 0 ? v : site.load(std::memory_order_relaxed);
}

// Whether a call of `units` on `ways` threads should run on the team, from
// the costs learned for its size. Where the size has no serial cost yet,
// the site's over every size stands in (a site's first call runs serially
// to measure it); where it has no parallel run yet, the team is assumed to
// divide the serial time by `ways` (not the site's parallel rate over every
// size: a size that shares worse would keep the others serial until they
// explored).
bool worthParallel(ParallelAccess::Costs& size, ParallelAccess::Costs& site, std::int64_t count, double units,
                   int threads) {
  if (g_always_parallel.load(std::memory_order_relaxed)) return true;
  const double serial_rate = learned(size.serial_ns_per_unit, site.serial_ns_per_unit);
  if (serial_rate < 0) return false;
  const double ways = static_cast<double>(std::min<std::int64_t>(count, threads));
  double parallel_rate = size.parallel_ns_per_unit.load(std::memory_order_relaxed);
  if (parallel_rate < 0) parallel_rate = serial_rate / ways;
  const double serial_ns = serial_rate * units;
  double handoff = learned(size.handoff_ns, site.handoff_ns);
  if (handoff < 0) handoff = g_costs.handoff_ns.load(std::memory_order_relaxed);
  const double parallel_ns = parallel_rate * units + handoff;
  const bool parallel = parallel_ns < kMargin * serial_ns;
  const double chosen = parallel ? parallel_ns : serial_ns, other = parallel ? serial_ns : parallel_ns;
  const double loss = chosen > 0 ? other / chosen - 1.0 : 1e9;  // nothing to gain from free work
  const auto period = static_cast<std::uint64_t>(std::min(1e6, std::max<double>(kExploreEvery, loss / kExploreBudget)));
  const bool explore = (size.decisions.fetch_add(1, std::memory_order_relaxed) + 1) % period == 0;
  return parallel != explore;
}

// The key of a problem size: its units and task count (never 0).
std::uint64_t sizeKey(std::int64_t count, double units) {
  std::uint64_t bits = 0;
  static_assert(sizeof bits == sizeof units);
  std::memcpy(&bits, &units, sizeof bits);
  return (bits ^ (static_cast<std::uint64_t>(count) * 0x9E3779B97F4A7C15ull)) | 1u;
}

std::int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

ParallelSite::ParallelSite(std::string_view name) : name_(name) {
  SiteList& list = siteList();
  std::lock_guard lock(list.mutex);
  list.sites.push_back(this);
}

int defaultIntraOpThreads(int local_processes) { return std::max(1, hardwareThreads() / std::max(1, local_processes)); }

void setIntraOpThreads(int threads) {
  threads = std::max(1, threads);
  std::lock_guard lock(g_team_mutex);
  if (threads == g_threads) return;
  g_team_ptr.store(nullptr, std::memory_order_release);
  g_team.reset();
  g_threads = threads;
}

int intraOpThreads() {
  std::lock_guard lock(g_team_mutex);
  return g_threads == 0 ? hardwareThreads() : g_threads;
}

int intraOpThreadsNow() {
  if (detail::inTeamTask() || g_steps_alone.load(std::memory_order_relaxed)) return 1;
  return intraOpThreads();
}

namespace detail {

void runTasks(ParallelSite& site, std::int64_t count, double units, TaskRef task) {
  if (count <= 0) return;
  bool& in_task = detail::inTeamTask();
  if (in_task) {  // nested: part of the enclosing task, on its thread
    for (std::int64_t i = 0; i < count; ++i) task.call(task.fn, i);
    return;
  }
  struct InTask {
    bool& flag;
    explicit InTask(bool& f) : flag(f) { flag = true; }
    ~InTask() { flag = false; }
  };
  ThreadTeam* t = count == 1 || g_steps_alone.load(std::memory_order_relaxed) ? nullptr : team();
  // Sizes are told apart only where there is a choice to make.
  ParallelAccess::Costs& all = ParallelAccess::allSizes(site);
  ParallelAccess::Costs& size = t != nullptr ? ParallelAccess::of(site, sizeKey(count, units)) : all;
  if (t != nullptr && worthParallel(size, all, count, units, t->threads())) {
    const std::int64_t start = nowNs();
    std::optional<TeamRun> run;
    {
      InTask scope(in_task);
      run = t->run(count, task);
    }
    if (run) {
      // The caller's time outside its own tasks is the hand-off's cost; its
      // time in tasks, per unit, the site's parallel rate. A worker
      // preempted inside a task holds the caller for the rest of a time
      // slice: such a sample counts in full, since on a busy host that is
      // what sharing costs on average (about one task's time per call when
      // the other core is half taken), and the site goes back to one thread.
      const std::int64_t overhead = std::max<std::int64_t>(0, nowNs() - start - run->caller_task_ns);
      for (std::atomic<double>* h : {&g_costs.handoff_ns, &size.handoff_ns, &all.handoff_ns})
        blend(*h, static_cast<double>(overhead));
      g_costs.fork_join_ns.fetch_add(overhead, std::memory_order_relaxed);
      if (units > 0) blend(size.parallel_ns_per_unit, static_cast<double>(run->caller_task_ns) / units);
      ParallelAccess::count(site, true, run->task_ns);
      if (run->error) std::rethrow_exception(run->error);
      return;
    }
  }
  // On this thread, in order.
  const std::int64_t start = nowNs();
  {
    InTask scope(in_task);
    for (std::int64_t i = 0; i < count; ++i) task.call(task.fn, i);
  }
  const std::int64_t ns = nowNs() - start;
  if (units > 0) {
    blend(all.serial_ns_per_unit, static_cast<double>(ns) / units);
    if (&size != &all) blend(size.serial_ns_per_unit, static_cast<double>(ns) / units);
  }
  ParallelAccess::count(site, false, ns);
}

}  // namespace detail

void stepEnded(std::uint64_t kind) {
  Steps& s = steps();
  std::lock_guard lock(s.mutex);
  const std::int64_t now = nowNs();
  const std::int64_t ns = s.last_end_ns < 0 ? -1 : now - s.last_end_ns;
  s.last_end_ns = now;
  if (ns < 0 || intraOpThreads() == 1) return;
  ++s.count;
  s.alone += g_steps_alone.load(std::memory_order_relaxed);
  g_steps_alone.store(s.tuner.onStep(kind, ns), std::memory_order_relaxed);
}

ParallelStats parallelStats() {
  ParallelStats total;
  {
    Steps& s = steps();
    std::lock_guard lock(s.mutex);
    total.steps = s.count;
    total.steps_alone = s.alone;
  }
  for (const auto& [name, s] : parallelSiteStats()) {
    total.serial_calls += s.serial_calls;
    total.parallel_calls += s.parallel_calls;
    total.task_ns += s.task_ns;
  }
  total.fork_join_ns = g_costs.fork_join_ns.load(std::memory_order_relaxed);
  return total;
}

std::vector<std::pair<std::string, ParallelStats>> parallelSiteStats() {
  SiteList& list = siteList();
  std::lock_guard lock(list.mutex);
  std::vector<std::pair<std::string, ParallelStats>> out;
  for (const ParallelSite* s : list.sites) out.emplace_back(s->name(), ParallelAccess::stats(*s));
  return out;
}

void keepThreadOffTeam() { detail::inTeamTask() = true; }

void setAlwaysParallelForTesting(bool always) { g_always_parallel.store(always); }

double parallelHandoffNs() { return g_costs.handoff_ns.load(std::memory_order_relaxed); }

}  // namespace hpu::device
