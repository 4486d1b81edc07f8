// The trace profiler behind HPUProfiler and PyTorchProfiler (see
// trace_profiler.cc): a Chrome trace per rank of the host's actions, the
// emulated device's ops and the collectives, kept by torch.profiler's
// schedule, and optionally a report of the kept events at teardown.
#pragma once

#include <spdlog/fmt/fmt.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hpu/core/config/params.h"
#include "hpu/core/profilers/profiler.h"

namespace hpu::core {

// One trace event. Tracks: 0 host, 1 device, 2 collectives.
struct TraceEvent {
  std::string name;
  const char* category;  // torch's: "user_annotation" (host actions, collectives, steps), "cpu_op" (device ops)
  int track;
  char phase;  // 'X' complete, 'i' instant
  std::int64_t begin_ns;
  std::int64_t duration_ns;
  std::string args;  // a JSON object, or empty
};

// torch.profiler.schedule.
struct TraceSchedule {
  std::int64_t skip_first = 0, wait = 1, warmup = 1, active = 3, repeat = 1;

  bool active_at(std::int64_t step) const {
    if (step < skip_first) return false;
    step -= skip_first;
    const std::int64_t cycle = wait + warmup + active;
    if (repeat > 0 && step / cycle >= repeat) return false;
    return step % cycle >= wait + warmup;
  }
  std::string str() const {
    return fmt::format("skip_first={}, wait={}, warmup={}, active={}, repeat={}", skip_first, wait, warmup, active, repeat);
  }
};

struct TraceOptions {
  std::string name = "HPUProfiler";  // in messages
  std::string dirpath, filename;
  bool record_shapes = false;
  TraceSchedule schedule;
  bool export_to_chrome = true;  // write <dirpath>/[<filename>-]rank<R>-<stage>.pt.trace.json
  // Called at teardown with the kept events (those of the trace).
  std::function<void(const std::vector<TraceEvent>&, const ProfilerContext&)> report;
};

// The init_args both profilers declare (dirpath, filename, schedule,
// record_shapes) and what they give.
std::vector<config::ParamSpec> traceParams();
TraceOptions traceOptions(const config::Params& p, std::string name);
// Lightning's reason for refusing record_module_names other than false.
inline constexpr const char* kNoModuleRanges =
    "hpu-train's trace records no module ranges ([pl][module]...): its modules are not wrapped in record_function; "
    "each device op is traced by its op name";
std::unique_ptr<Profiler> makeTraceProfiler(TraceOptions options);

}  // namespace hpu::core
