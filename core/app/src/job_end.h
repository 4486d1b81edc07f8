// How a job's process ends once its strategy is set up: teardown, and in the
// process that started a node's local ranks, the job's outcome reported once
// for them all (failure.h).
#pragma once

#include "hpu/core/strategies/strategy.h"

namespace hpu::core::app {

// In a catch block: tears the job down. A process that started local ranks
// reports the job's failure once, for them all, and throws JobFailedError
// with the root cause's exit code; any other rethrows its error for the
// caller to report.
[[noreturn]] void failJob(Strategy& strategy);

// After this process succeeded: tears the job down and returns the exit
// code, reporting a local worker's failure when one failed.
int finishJob(Strategy& strategy);

}  // namespace hpu::core::app
