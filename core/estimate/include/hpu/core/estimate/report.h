// The estimate's two reports, rendered from one EstimateResult: the text
// `hpu-train estimate` prints and the JSON it writes with --json (which
// bench/estimate/calibrate.py reads). Renderers only choose, order and
// format: units (GiB, ms, percent of a total the result holds) and the
// first ten ops; every value comes from the result.
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "hpu/core/estimate/estimate_result.h"

namespace hpu::core::estimate {

// `verbose`: also the assumptions and the step rank's step by the parameter that bounds it.
std::string textReport(const EstimateResult& result, bool verbose);

nlohmann::json jsonReport(const EstimateResult& result);

// "trainer.strategy: hpu_deepspeed_stage_3: peak 12.34 GiB (fits)", as both reports list it.
std::string describe(const FitChange& change);

}  // namespace hpu::core::estimate
