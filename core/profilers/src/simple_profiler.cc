// SimpleProfiler: Lightning's table of actions (calls, mean and total time,
// share of the run) printed by global rank 0 at the end of a stage, or
// written to one file per rank with `filename`. The report ends with the
// emulated device's lazy-mode statistics (compilations, cache hits,
// recompile causes).
#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <unordered_map>

#include "action_timer.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/profilers/profiler.h"
#include "hpu/device/device.h"

namespace hpu::core {
namespace {

using config::Type;

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class SimpleProfiler final : public Profiler {
 public:
  explicit SimpleProfiler(const config::Params& p)
      : dirpath_(p.has("dirpath") ? p.getString("dirpath") : ""),
        filename_(p.has("filename") ? p.getString("filename") : ""),
        extended_(p.getBool("extended")) {}

  void setup(const ProfilerContext& context) override {
    context_ = context;
    stats_.clear();
    begin_ = detail::ActionTimer::Clock::now();
  }

  void start(std::string_view action) override { timer_.start(action); }

  void stop(std::string_view action) override {
    const auto open = timer_.stop(action);
    const double seconds = std::chrono::duration<double>(detail::ActionTimer::Clock::now() - open.begin).count();
    auto it = stats_.find(action);
    if (it == stats_.end()) it = stats_.emplace(std::string(action), Stat{}).first;
    ++it->second.calls;
    it->second.total += seconds;
  }

  void teardown() override {
    const double run = std::chrono::duration<double>(detail::ActionTimer::Clock::now() - begin_).count();
    std::string report = summary(run);
    // The end-of-run summary prints the lazy-mode statistics to stdout; a
    // file carries them itself.
    if (!filename_.empty() && context_.device != nullptr) report += "\n" + context_.device->graph().summary() + "\n";
    emitProfilerReport(dirpath_, filename_, context_, report);
  }

 private:
  struct Stat {
    std::int64_t calls = 0;
    double total = 0;
  };

  // Lightning's layout: the actions by total time, after a Total row
  // holding the whole stage's duration.
  std::string summary(double run) const {
    std::vector<std::pair<std::string, Stat>> rows(stats_.begin(), stats_.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.total > b.second.total; });
    std::size_t width = 6;
    std::int64_t calls = 0;
    for (const auto& [name, s] : rows) {
      width = std::max(width, name.size());
      calls += s.calls;
    }
    std::string stage = context_.stage;
    std::transform(stage.begin(), stage.end(), stage.begin(), ::toupper);
    std::string out = fmt::format("{} Profiler Report\n\n", stage);
    std::string header, total;
    if (extended_) {
      header = fmt::format("|  {:<{}}  |  {:>17}  |  {:>9}  |  {:>14}  |  {:>12}  |", "Action", width,
                           "Mean duration (s)", "Num calls", "Total time (s)", "Percentage %");
      total = fmt::format("|  {:<{}}  |  {:>17}  |  {:>9}  |  {:>14.5f}  |  {:>12}  |", "Total", width, "-", calls,
                          run, "100 %");
    } else {
      header = fmt::format("|  {:<{}}  |  {:>17}  |  {:>14}  |", "Action", width, "Mean duration (s)", "Total time (s)");
      total = fmt::format("|  {:<{}}  |  {:>17}  |  {:>14.5f}  |", "Total", width, "-", run);
    }
    const std::string rule(header.size(), '-');
    out += rule + "\n" + header + "\n" + rule + "\n" + total + "\n" + rule + "\n";
    for (const auto& [name, s] : rows) {
      const double mean = s.total / static_cast<double>(s.calls);
      if (extended_)
        out += fmt::format("|  {:<{}}  |  {:>17.6f}  |  {:>9}  |  {:>14.5f}  |  {:>12.3f}  |\n", name, width, mean, s.calls,
                           s.total, run > 0 ? 100.0 * s.total / run : 0.0);
      else
        out += fmt::format("|  {:<{}}  |  {:>17.6f}  |  {:>14.5f}  |\n", name, width, mean, s.total);
    }
    return out + rule + "\n";
  }

  std::string dirpath_, filename_;
  bool extended_;
  ProfilerContext context_;
  detail::ActionTimer timer_;
  detail::ActionTimer::Clock::time_point begin_ = detail::ActionTimer::Clock::now();
  std::unordered_map<std::string, Stat, StringHash, std::equal_to<>> stats_;
};

HPU_REGISTER_COMPONENT(
    Profiler,
    config::ComponentSchema{
        config::ComponentKind::kProfiler,
        "SimpleProfiler",
        "lightning.pytorch.profilers",
        {"SimpleProfiler",
         "",
         {{"dirpath", Type::optional(Type::string()), "null",
           "Directory of the report files (null: the logger's log_dir)."},
          {"filename", Type::optional(Type::string()), "null",
           "Write the report to <dirpath>/<filename>-rank<R>-<stage>.txt on every rank (null: rank 0 prints it)."},
          {"extended", Type::boolean(), "true", "Add the calls and share-of-run columns."}}},
        "Times every action of the run and reports calls, mean and total time per action.",
        {},
        "simple"},
    [](const config::Params& p) { return std::make_unique<SimpleProfiler>(p); });

}  // namespace
}  // namespace hpu::core
