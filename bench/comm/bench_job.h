// What the comm benchmarks' ranks share: joining the job from the
// environment, reading the plan and timing a collective the same way for
// every size.
#pragma once

#include <unistd.h>  // environ: a benchmark joins with its own environment

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "hpu/comm/cluster_environment.h"
#include "hpu/comm/comm_settings.h"
#include "hpu/comm/rendezvous.h"

namespace hpu::comm::bench {

// "bytes:iterations,..." as pairs.
inline std::vector<std::pair<std::size_t, int>> parsePlan(const std::string& text) {
  std::vector<std::pair<std::size_t, int>> plan;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string entry = text.substr(at, end - at);
    const std::size_t colon = entry.find(':');
    if (colon == std::string::npos) throw std::invalid_argument("plan entry '" + entry + "' is not bytes:iterations");
    plan.emplace_back(std::stoull(entry.substr(0, colon)), std::stoi(entry.substr(colon + 1)));
    at = end + 1;
  }
  return plan;
}

// The job's group as the environment describes it (MASTER_ADDR, MASTER_PORT,
// WORLD_SIZE, NODE_RANK, LOCAL_RANK, HPU_JOB_TOKEN), `devices` ranks on each
// of `nodes` nodes; `curve` encrypts on loopback too.
inline std::unique_ptr<ProcessGroup> joinBenchJob(int devices, int nodes, bool curve) {
  const Environment env = Environment::fromEntries(environ);
  JoinOptions options;
  options.cluster = resolveClusterInfo(env, Topology{devices, nodes});
  options.settings = commSettingsFromEnv(env);
  options.token = JobToken::fromEnv(env);
  options.version = "bench";
  options.encryptLoopback = curve;
  return joinProcessGroup(options);
}

// The slowest rank's mean seconds per call of `collective`, timed over
// `iterations` after 10% (at least 2) untimed warm-up calls and a barrier.
template <class Collective>
double secondsPerCall(ProcessGroup& pg, int iterations, const Collective& collective) {
  for (int i = 0; i < std::max(2, iterations / 10); ++i) collective();
  pg.barrier("timed");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) collective();
  std::vector<float> seconds{
      std::chrono::duration<float>(std::chrono::steady_clock::now() - start).count() / static_cast<float>(iterations)};
  pg.allreduce(seconds, ReduceOp::kMax);
  return seconds[0];
}

}  // namespace hpu::comm::bench
