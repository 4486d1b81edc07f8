// HPUProfiler (lightning_habana's profiler): the Chrome trace of
// trace_profiler.h, one file per rank.
#include "hpu/core/config/registry.h"
#include "trace_profiler.h"

namespace hpu::core {
namespace {

HPU_REGISTER_COMPONENT(
    Profiler,
    config::ComponentSchema{config::ComponentKind::kProfiler,
                            "HPUProfiler",
                            "lightning_habana",
                            {"HPUProfiler", "", traceParams()},
                            "Chrome trace of host actions, emulated device ops and collectives, one file per rank."},
    [](const config::Params& p) { return makeTraceProfiler(traceOptions(p, "HPUProfiler")); });

}  // namespace
}  // namespace hpu::core
