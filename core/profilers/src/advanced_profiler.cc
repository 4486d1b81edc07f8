// AdvancedProfiler (trainer.profiler: advanced): Lightning's cProfile
// report, one profile per action. While an action runs, every function that
// runs inside it is counted in its profile: the actions nested in it
// ("action:<name>") and the emulated device's ops ("hpu:<op>", backward
// functions "hpu:<op>_backward"), with pstats' columns: calls, total time
// in the function itself (less what ran nested in it), time per call,
// cumulative time, cumulative time per call; sorted by cumulative time,
// line_count_restriction limiting the rows. The header's seconds are the
// action's own total time. Global rank 0 prints the report at the end of
// the stage, or every rank writes it with `filename`.
// Not thread-safe: the training thread only.
#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "action_timer.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/config/scalars.h"
#include "hpu/core/profilers/profiler.h"
#include "hpu/core/tensor/op_record.h"

namespace hpu::core {
namespace {

using config::Type;
using Clock = detail::ActionTimer::Clock;

struct FunctionStats {
  std::int64_t calls = 0;
  double tottime = 0, cumtime = 0;  // seconds
};

struct ActionProfile {
  double seconds = 0;  // the action's own duration, summed over its calls
  std::map<std::string, FunctionStats> functions;
};

class AdvancedProfiler final : public Profiler, public ops::OpObserver {
 public:
  explicit AdvancedProfiler(const config::Params& p)
      : dirpath_(p.has("dirpath") ? p.getString("dirpath") : ""),
        filename_(p.has("filename") ? p.getString("filename") : ""),
        restriction_(p.node("line_count_restriction")) {}

  void setup(const ProfilerContext& context) override {
    context_ = context;
    profiles_.clear();
    order_.clear();
    frames_.clear();
  }

  void start(std::string_view action) override {
    timer_.start(action);
    if (profiles_.find(std::string(action)) == profiles_.end()) {
      profiles_.emplace(std::string(action), ActionProfile{});
      order_.emplace_back(action);
    }
    frames_.push_back({std::string(action), 0.0});
  }

  void stop(std::string_view action) override {
    const auto open = timer_.stop(action);
    const double seconds = std::chrono::duration<double>(Clock::now() - open.begin).count();
    // The frame of `action` (actions stop innermost first; ActionTimer checked the name).
    auto it = std::find_if(frames_.rbegin(), frames_.rend(), [&](const Frame& f) { return f.action == action; });
    const double nested = it->nested;
    frames_.erase(std::next(it).base());
    profiles_[std::string(action)].seconds += seconds;
    record("action:" + std::string(action), seconds, seconds - nested);
  }

  void onOp(const ops::OpEvent& e) override {
    const double seconds = std::chrono::duration<double>(e.end - e.begin).count();
    record(std::string("hpu:") + std::string(e.op) + (e.backward ? "_backward" : ""), seconds, seconds);
  }
  ops::OpObserver* opObserver() override { return this; }

  void teardown() override {
    std::vector<std::pair<std::string, std::string>> sections;
    for (const std::string& action : order_) sections.emplace_back(action, stats(profiles_[action]));
    emitProfilerReport(dirpath_, filename_, context_, profilerReport(context_, sections));
  }

 private:
  struct Frame {
    std::string action;
    double nested;  // seconds of functions that ran directly inside it
  };

  // A function ran for `seconds`, `own` of them outside functions nested in
  // it: counted in the profile of every action running, and as nested time
  // of the innermost one.
  void record(const std::string& function, double seconds, double own) {
    if (!frames_.empty()) frames_.back().nested += seconds;
    for (const Frame& f : frames_) {
      FunctionStats& s = profiles_[f.action].functions[function];
      ++s.calls;
      s.tottime += std::max(0.0, own);
      s.cumtime += seconds;
    }
  }

  // pstats.Stats(...).sort_stats("cumulative").print_stats(restriction).
  std::string stats(const ActionProfile& p) const {
    std::vector<std::pair<std::string, FunctionStats>> rows(p.functions.begin(), p.functions.end());
    std::stable_sort(rows.begin(), rows.end(),
                     [](const auto& a, const auto& b) { return a.second.cumtime > b.second.cumtime; });
    std::int64_t calls = 0;
    for (const auto& [name, s] : rows) calls += s.calls;
    std::string out = fmt::format("         {} function calls in {:.3f} seconds\n\n   Ordered by: cumulative time\n",
                                  calls, p.seconds);
    const std::size_t all = rows.size();
    std::size_t keep = all;
    std::string limit;
    if (restriction_.isScalar() && restriction_.str().find_first_of(".eE") != std::string::npos) {
      const double fraction = config::asFloat(restriction_);
      if (fraction < 1.0) {
        keep = static_cast<std::size_t>(std::lround(static_cast<double>(all) * fraction));
        limit = config::formatFloat(fraction);
      }
    } else if (restriction_.isScalar()) {
      keep = std::min(all, static_cast<std::size_t>(config::asInt(restriction_)));
      limit = restriction_.str();
    }
    if (keep < all) {
      rows.resize(keep);
      out += fmt::format("   List reduced from {} to {} due to restriction <{}>\n", all, keep, limit);
    }
    out += "\n";
    if (rows.empty()) return out;
    out += "   ncalls  tottime  percall  cumtime  percall filename:lineno(function)\n";
    for (const auto& [name, s] : rows) {
      const double n = static_cast<double>(s.calls);
      out += fmt::format("{:>9} {:8.3f} {:8.3f} {:8.3f} {:8.3f} {}\n", s.calls, s.tottime, s.tottime / n, s.cumtime,
                         s.cumtime / n, name);
    }
    return out + "\n\n";
  }

  std::string dirpath_, filename_;
  config::Node restriction_;
  ProfilerContext context_;
  detail::ActionTimer timer_;
  std::unordered_map<std::string, ActionProfile> profiles_;
  std::vector<std::string> order_;  // actions by first start
  std::vector<Frame> frames_;       // running actions, innermost last
};

HPU_REGISTER_COMPONENT(
    Profiler,
    config::ComponentSchema{
        config::ComponentKind::kProfiler,
        "AdvancedProfiler",
        "lightning.pytorch.profilers",
        {"AdvancedProfiler",
         "",
         {{"dirpath", Type::optional(Type::string()), "null",
           "Directory of the report files (null: the logger's log_dir)."},
          {"filename", Type::optional(Type::string()), "null",
           "Write the report to <dirpath>/<filename>-rank<R>-<stage>.txt on every rank (null: rank 0 prints it)."},
          {"line_count_restriction", Type::anyOf({Type::integer().min(0), Type::real().min(0.0).max(1.0)}), "1.0",
           "Rows per action: a count (int) or a fraction of them (float, 1.0: all)."},
          {"dump_stats", Type::boolean(), "false",
           "Save cProfile's binary stats.", "there is no Python profile to save; the report is the text table"}}},
        "Per action, the calls and cumulative times of every action and device op that ran inside it, in pstats' "
        "layout (trainer.profiler: advanced).",
        {},
        "advanced"},
    [](const config::Params& p) { return std::make_unique<AdvancedProfiler>(p); });

}  // namespace
}  // namespace hpu::core
