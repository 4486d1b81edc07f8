// Elastic restarts from the config: trainer.max_restarts (else
// HPU_MAX_RESTARTS) above 0 makes the process the user started an elastic
// agent (comm/elastic_agent.h) that runs every local rank as a worker and
// restarts them all after a failure, instead of being local rank 0.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "hpu/core/app/run.h"
#include "hpu/env/environment.h"

namespace hpu::core::app {

// The job's exit code when this process ran it as an elastic agent; nullopt
// when this process trains itself (no restarts asked, or it is an agent's
// worker). Throws UsageError when restarts are asked of a process that
// something else started (srun, mpirun, torchrun, a LOCAL_RANK given by hand).
std::optional<int> runElasticAgent(const RunRequest& request, int devices_per_node);

// The elastic round this process runs in: HPU_RESTART_COUNT, set by the
// agent for its workers; 0 otherwise.
int restartRound(const Environment& env);

}  // namespace hpu::core::app
