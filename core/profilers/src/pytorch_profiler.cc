// PyTorchProfiler (trainer.profiler: pytorch): Lightning's torch.profiler
// wrapper. The Chrome trace of trace_profiler.h (export_to_chrome), and at
// the end of the stage torch's key_averages() table of the kept events:
// every device op and host action ("[pl][profile]<action>", as Lightning's
// record_function names them) with its self and total time and calls,
// sorted by sort_by_key, row_limit rows, one row per input shape with
// group_by_input_shapes. Self time is an event's time less that of the
// events nested in it (host actions enclose the ops they run).
#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "hpu/core/config/registry.h"
#include "trace_profiler.h"

namespace hpu::core {
namespace {

using config::Type;

struct OpAverage {
  std::string key, shapes;
  std::int64_t calls = 0;
  double self_us = 0, total_us = 0;
};

// torch.autograd.profiler_util._format_time.
std::string formatTime(double us) {
  if (us >= 1e6) return fmt::format("{:.3f}s", us / 1e6);
  if (us >= 1e3) return fmt::format("{:.3f}ms", us / 1e3);
  return fmt::format("{:.3f}us", us);
}

// The "Input Dims" of an op's args, as torch prints input shapes: [[64, 784], [10, 784]].
std::string inputShapes(const std::string& args) {
  if (args.empty()) return "[]";
  const nlohmann::json j = nlohmann::json::parse(args, nullptr, false);
  if (!j.is_object() || !j.contains("Input Dims")) return "[]";
  std::string out = "[";
  for (const auto& dims : j["Input Dims"]) {
    out += out.size() > 1 ? ", [" : "[";
    for (std::size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i].get<std::int64_t>());
    out += "]";
  }
  return out + "]";
}

class KeyAverages {
 public:
  KeyAverages(bool group_by_input_shapes, std::string sort_by, std::int64_t row_limit)
      : by_shapes_(group_by_input_shapes), sort_by_(std::move(sort_by)), row_limit_(row_limit) {}

  // The table of `events`' host and device records (collectives run on
  // another thread and are left to the trace).
  std::string table(const std::vector<TraceEvent>& events) const {
    std::vector<const TraceEvent*> spans;
    for (const TraceEvent& e : events)
      if (e.phase == 'X' && e.track != 2) spans.push_back(&e);
    std::sort(spans.begin(), spans.end(), [](const TraceEvent* a, const TraceEvent* b) {
      return a->begin_ns != b->begin_ns ? a->begin_ns < b->begin_ns : a->duration_ns > b->duration_ns;
    });
    std::vector<double> child_ns(spans.size(), 0);
    std::vector<std::size_t> open;  // enclosing spans, innermost last
    for (std::size_t i = 0; i < spans.size(); ++i) {
      while (!open.empty() && spans[open.back()]->begin_ns + spans[open.back()]->duration_ns <= spans[i]->begin_ns)
        open.pop_back();
      if (!open.empty()) child_ns[open.back()] += static_cast<double>(spans[i]->duration_ns);
      open.push_back(i);
    }
    std::map<std::pair<std::string, std::string>, OpAverage> rows;
    double self_total = 0;
    for (std::size_t i = 0; i < spans.size(); ++i) {
      const TraceEvent& e = *spans[i];
      // torch's key_averages() keeps the steps in one row, "ProfilerStep*".
      const std::string key = e.name.starts_with("ProfilerStep#") ? "ProfilerStep*"
                              : e.track == 0                      ? "[pl][profile]" + e.name
                                                                  : e.name;
      const std::string shapes = by_shapes_ ? inputShapes(e.args) : "";
      OpAverage& r = rows[{key, shapes}];
      r.key = key;
      r.shapes = shapes;
      ++r.calls;
      const double total = static_cast<double>(e.duration_ns) / 1e3;
      const double self = std::max(0.0, total - child_ns[i] / 1e3);
      r.total_us += total;
      r.self_us += self;
      self_total += self;
    }
    std::vector<OpAverage> sorted;
    for (auto& [k, r] : rows) sorted.push_back(r);
    std::stable_sort(sorted.begin(), sorted.end(), [&](const OpAverage& a, const OpAverage& b) {
      return sortValue(a) > sortValue(b);
    });
    if (row_limit_ > 0 && static_cast<std::int64_t>(sorted.size()) > row_limit_) sorted.resize(static_cast<std::size_t>(row_limit_));
    return render(sorted, self_total);
  }

 private:
  double sortValue(const OpAverage& r) const {
    if (sort_by_ == "self_cpu_time_total") return r.self_us;
    if (sort_by_ == "cpu_time") return r.total_us / static_cast<double>(r.calls);
    if (sort_by_ == "count") return static_cast<double>(r.calls);
    return r.total_us;  // cpu_time_total
  }

  // torch.autograd.profiler_util._build_table's layout (CPU columns).
  std::string render(const std::vector<OpAverage>& rows, double self_total) const {
    constexpr std::size_t kMaxName = 55, kColumn = 12;
    std::size_t name_width = 4, shapes_width = 12;
    for (const OpAverage& r : rows) {
      name_width = std::max(name_width, r.key.size() + 4);
      shapes_width = std::max(shapes_width, r.shapes.size() + 4);
    }
    name_width = std::min(name_width, kMaxName);
    shapes_width = std::min<std::size_t>(shapes_width, 80);
    std::string sep = std::string(name_width, '-') + "  ";
    for (int i = 0; i < 6; ++i) sep += std::string(kColumn, '-') + "  ";
    if (by_shapes_) sep += std::string(shapes_width, '-') + "  ";
    const auto line = [&](const std::string& name, const std::array<std::string, 6>& cells, const std::string& shapes) {
      std::string out = fmt::format("{:>{}}  ", name, name_width);
      for (const std::string& c : cells) out += fmt::format("{:>{}}  ", c, kColumn);
      if (by_shapes_) out += fmt::format("{:<{}}  ", shapes, shapes_width);
      return out + "\n";
    };
    std::string out = sep + "\n" +
                      line("Name", {"Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"},
                           "Input Shapes") +
                      sep + "\n";
    const auto percent = [&](double us) { return fmt::format("{:.2f}%", self_total > 0 ? 100.0 * us / self_total : 0.0); };
    for (const OpAverage& r : rows) {
      const std::string name = r.key.size() > kMaxName - 4 ? r.key.substr(0, kMaxName - 7) + "..." : r.key;
      out += line(name,
                  {percent(r.self_us), formatTime(r.self_us), percent(r.total_us), formatTime(r.total_us),
                   formatTime(r.total_us / static_cast<double>(r.calls)), std::to_string(r.calls)},
                  r.shapes);
    }
    return out + sep + "\n" + "Self CPU time total: " + formatTime(self_total) + "\n";
  }

  bool by_shapes_;
  std::string sort_by_;
  std::int64_t row_limit_;
};

std::unique_ptr<Profiler> makePyTorchProfiler(const config::Params& p) {
  TraceOptions o = traceOptions(p, "PyTorchProfiler");
  o.export_to_chrome = p.getBool("export_to_chrome");
  const KeyAverages averages(p.getBool("group_by_input_shapes"),
                             p.has("sort_by_key") ? p.getString("sort_by_key") : "cpu_time_total",
                             p.getInt("row_limit"));
  const std::string dirpath = o.dirpath, filename = o.filename;
  o.report = [=](const std::vector<TraceEvent>& events, const ProfilerContext& context) {
    emitProfilerReport(dirpath, filename, context, profilerReport(context, {{"records", averages.table(events)}}));
  };
  return makeTraceProfiler(std::move(o));
}

HPU_REGISTER_COMPONENT(
    Profiler,
    config::ComponentSchema{
        config::ComponentKind::kProfiler,
        "PyTorchProfiler",
        "lightning.pytorch.profilers",
        {"PyTorchProfiler",
         "",
         [] {
           auto params = traceParams();
           params.push_back({"group_by_input_shapes", Type::boolean(), "false",
                             "One table row per op and input shapes (needs record_shapes)."});
           params.push_back({"emit_nvtx", Type::boolean(), "false", "NVTX ranges for nvprof.", "NVTX is CUDA's; the trace file holds the op ranges"});
           params.push_back({"export_to_chrome", Type::boolean(), "true", "Write the Chrome trace."});
           params.push_back({"row_limit", Type::integer().min(-1), "20", "Rows of the table (-1: all)."});
           params.push_back({"sort_by_key",
                             Type::optional(Type::string({"cpu_time", "cpu_time_total", "self_cpu_time_total", "count"})),
                             "null", "Sort the table by this column (null: cpu_time_total)."});
           // Lightning's default is true; hpu-train's is false, the one it
           // honours (lightning_interop_test.cc's kDefaultDiffers).
           params.push_back({"record_module_names", Type::boolean(), "false",
                             "Module ranges in the trace (Lightning's default: true).", kNoModuleRanges});
           params.push_back({"table_kwargs", Type::optional(Type::dict()), "null",
                             "Extra arguments of torch's key_averages().table().",
                             "the table has torch's default layout (its columns and widths are fixed)"});
           return params;
         }()},
        "torch.profiler: a Chrome trace of host actions, emulated device ops and collectives, and the table of "
        "ops by time (trainer.profiler: pytorch).",
        {},
        "pytorch"},
    [](const config::Params& p) { return makePyTorchProfiler(p); });

}  // namespace
}  // namespace hpu::core
