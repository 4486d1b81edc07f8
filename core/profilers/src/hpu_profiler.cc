// HPUProfiler (lightning_habana's profiler): the Chrome trace of
// trace_profiler.h, one file per rank. As lightning-habana's, it writes no
// table of ops (its summary() is "not supported"), so the PyTorchProfiler
// keys that shape the table take their defaults only.
#include "hpu/core/config/registry.h"
#include "trace_profiler.h"

namespace hpu::core {
namespace {

using config::Type;

constexpr const char* kNoTable =
    "HPUProfiler writes the trace only, no table of ops (as lightning-habana's); use PyTorchProfiler for the table";

std::vector<config::ParamSpec> hpuProfilerParams() {
  std::vector<config::ParamSpec> params = traceParams();
  params.push_back({"group_by_input_shapes", Type::boolean(), "false", "One table row per op and input shapes.", kNoTable});
  params.push_back({"export_to_chrome", Type::boolean(), "true", "Write the Chrome trace (false: nothing is written)."});
  params.push_back({"row_limit", Type::integer().min(-1), "20", "Rows of the table.", kNoTable});
  params.push_back({"sort_by_key", Type::optional(Type::string()), "null", "Sort the table by this column.", kNoTable});
  params.push_back({"record_module_names", Type::boolean(), "false", "Module ranges in the trace.", kNoModuleRanges});
  params.push_back({"emit_nvtx", Type::boolean(), "false", "NVTX ranges for nvprof.",
                    "NVTX is CUDA's; the trace file holds the op ranges"});
  params.push_back({"table_kwargs", Type::optional(Type::dict()), "null", "Extra arguments of the table.", kNoTable});
  return params;
}

HPU_REGISTER_COMPONENT(
    Profiler,
    config::ComponentSchema{config::ComponentKind::kProfiler,
                            "HPUProfiler",
                            "lightning_habana",
                            {"HPUProfiler", "", hpuProfilerParams()},
                            "Chrome trace of host actions, emulated device ops and collectives, one file per rank."},
    [](const config::Params& p) {
      TraceOptions o = traceOptions(p, "HPUProfiler");
      o.export_to_chrome = p.getBool("export_to_chrome");
      return makeTraceProfiler(std::move(o));
    });

}  // namespace
}  // namespace hpu::core
