#include "hpu/core/app/estimate.h"

#include <cstdio>

#include "fit_suggestions.h"
#include "hpu/core/base/file_io.h"
#include "hpu/core/estimate/pricing.h"
#include "hpu/core/estimate/report.h"
#include "job_trace.h"

namespace hpu::core {

int runEstimate(const EstimateRequest& request) {
  const device::EmulatorSettings settings = device::loadEmulatorSettings(request.run.env);
  const device::MemoryLimit limit = device::memoryLimitOf(settings);

  const estimate::TracedJob job = app::traceJob(request.run, request.steps, settings);
  const device::GaudiModel model(settings.generation, job.shape.topology());
  estimate::EstimateResult result = estimate::priceJob(job, model, limit);
  if (!result.fits)
    result.suggestions = app::fitSuggestions(request.run, request.steps, settings, job.shape, limit.bytes);

  std::fputs(estimate::textReport(result, request.verbose).c_str(), stdout);
  std::fflush(stdout);
  if (!request.json_path.empty()) writeFileAtomically(request.json_path, estimate::jsonReport(result).dump(2) + "\n");
  return result.fits ? 0 : 1;
}

}  // namespace hpu::core
