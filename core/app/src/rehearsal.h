// The layout rehearsal: before a process starts a job's ranks, it builds
// what the first rank (and, under pipeline stages, the last one) builds
// before its first step, shape-only, as `estimate` traces a rank. A layout
// the model cannot take (heads, experts or layers that do not divide, a
// combination that does not run) is refused there, with exit 2, before any
// rank starts or waits for another.
#pragma once

#include "hpu/core/app/run.h"

namespace hpu::core::app {

// Throws the UsageError (or ConfigError) the job's ranks would throw while
// setting up. Does nothing for a job of one rank, or in a process that
// something else started as one rank of a job (a local worker, srun,
// torchrun), whose launcher rehearsed it.
void rehearseLayout(const RunRequest& request, int devices_per_node);

}  // namespace hpu::core::app
