#include "fit_suggestions.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <string>
#include <utility>

#include "hpu/core/app/root.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/config/compose.h"
#include "hpu/core/config/params.h"
#include "hpu/core/config/scalars.h"
#include "config_settings.h"
#include "job_trace.h"

namespace hpu::core::app {
namespace {

// A change to the config: what it is, and its settings (dotted keys and
// YAML values, as on the command line).
struct Change {
  std::string what;
  Settings settings;
};

RunRequest withChange(const RunRequest& run, const Change& change) { return withSettings(run, change.settings); }

}  // namespace

std::vector<estimate::FitChange> fitSuggestions(const RunRequest& run, std::int64_t steps,
                                                const device::EmulatorSettings& settings,
                                                const estimate::JobShape& s, std::uint64_t limit) {
  std::vector<estimate::FitChange> out;
  const auto peakWith = [&](const Change& c) { return tracePeak(withChange(run, c), steps, settings); };
  const auto tryChange = [&](const Change& c) {
    try {
      const std::uint64_t peak = peakWith(c);
      out.push_back({c.what, peak, peak <= limit});
    } catch (const std::exception& e) {
      spdlog::debug("estimate: could not trace '{}': {}", c.what, e.what());
    }
  };
  const config::Node& cfg = run.config;
  if (!s.predict) {
    // A strategy named by alias moves to the next ZeRO stage, then to offload.
    const config::Node* strategy = configAt(cfg, {"trainer", "strategy"});
    const std::string name = strategy && strategy->isScalar() ? strategy->str() : "";
    const bool deepspeed = name.find("deepspeed") != std::string::npos;
    if (!name.empty() && (!deepspeed || name.find("offload") == std::string::npos)) {
      std::vector<std::string> next;
      if (s.world > 1 && name.find("stage_3") == std::string::npos) next.push_back("hpu_deepspeed_stage_3");
      next.push_back(s.world > 1 ? "hpu_deepspeed_stage_3_offload" : "hpu_deepspeed_stage_2_offload");
      for (const std::string& n : next) tryChange({fmt::format("trainer.strategy: {}", n), {{"trainer.strategy", n}}});
    }
    const config::Node* checkpointing = configAt(cfg, {"model", "init_args", "gradient_checkpointing"});
    if (checkpointing && checkpointing->isScalar() && config::parseBool(checkpointing->str()) != true)
      tryChange({"model.init_args.gradient_checkpointing: true", {{"model.init_args.gradient_checkpointing", "true"}}});
  }
  // The largest batch under the current one that fits (the peak grows with
  // the batch): a binary search.
  if (configAt(cfg, {"data", "init_args", "batch_size"}) && s.micro_batch > 1) {
    const auto change = [&](std::int64_t b) {
      Change c{fmt::format("data.init_args.batch_size: {}", b), {{"data.init_args.batch_size", std::to_string(b)}}};
      if (!s.predict && (s.micro_batch * s.accumulate) % b == 0) {
        const std::int64_t accumulate = s.micro_batch * s.accumulate / b;
        c.what += fmt::format(", trainer.accumulate_grad_batches: {} (the same global batch)", accumulate);
        c.settings.emplace_back("trainer.accumulate_grad_batches", std::to_string(accumulate));
      }
      return c;
    };
    std::int64_t lo = 0, hi = s.micro_batch;  // lo fits (0: none known), hi does not
    std::uint64_t lo_peak = 0, hi_peak = 0;
    try {
      while (hi - lo > 1) {
        const std::int64_t mid = lo + (hi - lo) / 2;
        const std::uint64_t peak = peakWith(change(mid));
        (peak <= limit ? lo : hi) = mid;
        (peak <= limit ? lo_peak : hi_peak) = peak;
      }
      if (lo > 0)
        out.push_back({change(lo).what, lo_peak, lo_peak <= limit});
      else if (hi == 1)
        out.push_back({change(1).what, hi_peak, hi_peak <= limit});
    } catch (const std::exception& e) {
      spdlog::debug("estimate: could not trace a smaller batch: {}", e.what());
    }
  }
  return out;
}

}  // namespace hpu::core::app
