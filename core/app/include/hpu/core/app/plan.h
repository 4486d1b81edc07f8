// `hpu-train estimate plan`: the fastest layout that fits for a config's
// model, cluster and global batch (app/src/plan_search.h), as a ranked table,
// optionally as JSON with each layout's config overrides, and the winner
// written as a config that `fit` and `estimate fit` take as they are.
#pragma once

#include <cstddef>
#include <string>

#include "hpu/core/app/run.h"

namespace hpu::core {

struct PlanRequest {
  RunRequest run;           // run.subcommand: "fit"
  std::string json_path;    // also write every layout as JSON here ("": no)
  std::string output_path;  // write the winner's config here ("": no)
  std::size_t top = 10;     // rows of the table
  std::size_t whole = 3;    // the fastest this many are traced whole
};

// Prints the table; returns 0. Throws UsageError (exit 2, nothing written)
// when no layout fits, saying on how many nodes one would, or when the
// global batch divides across no layout.
int runPlan(const PlanRequest& request);

}  // namespace hpu::core
