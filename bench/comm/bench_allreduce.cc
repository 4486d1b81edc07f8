// One rank of the allreduce benchmark; bench/comm/allreduce_vs.py starts N
// of them (and as many of gloo and Open MPI) and compares.
//
//   bench_allreduce <devices> <num_nodes> <plan> [--curve]
//
// The job comes from the environment as for training (MASTER_ADDR,
// MASTER_PORT, WORLD_SIZE, NODE_RANK, LOCAL_RANK, HPU_JOB_TOKEN):
// devices = N, num_nodes = 1 puts every rank on one node (shared memory
// between them), devices = 1, num_nodes = N makes each rank its own node
// (tcp:// on loopback). <plan> is "bytes:iterations,..." (float32 sum, zeros so values
// never overflow or go denormal). For each entry: the iterations are timed
// after 10% (at least 2) untimed warm-up runs and a barrier; each rank's
// mean time per allreduce is max-reduced, and rank 0 prints
// "<bytes> <seconds per allreduce>" on stdout (logs below warnings are off).
// --curve encrypts on loopback too, as every address but loopback is: the
// cost of CURVE between nodes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "hpu/comm/cluster_environment.h"
#include "hpu/comm/comm_settings.h"
#include "hpu/comm/rendezvous.h"

namespace {

using namespace hpu::comm;

// "bytes:iterations,..." as pairs.
std::vector<std::pair<std::size_t, int>> parsePlan(const std::string& text) {
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

double secondsPerAllreduce(ProcessGroup& pg, std::size_t bytes, int iterations) {
  std::vector<float> data(bytes / sizeof(float), 0.0f);
  for (int i = 0; i < std::max(2, iterations / 10); ++i) pg.allreduce(data, ReduceOp::kSum);
  pg.barrier("timed");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) pg.allreduce(data, ReduceOp::kSum);
  std::vector<float> seconds{
      std::chrono::duration<float>(std::chrono::steady_clock::now() - start).count() / static_cast<float>(iterations)};
  pg.allreduce(seconds, ReduceOp::kMax);
  return seconds[0];
}

}  // namespace

int main(int argc, char** argv) {
  const bool curve = argc == 5 && std::string(argv[4]) == "--curve";
  if (argc != 4 && !curve) {
    std::fprintf(stderr, "usage: bench_allreduce <devices> <num_nodes> <bytes:iterations,...> [--curve]\n");
    return 64;
  }
  spdlog::set_level(spdlog::level::warn);  // stdout is the result
  try {
    const EnvMap env = processEnvironment();
    JoinOptions options;
    options.cluster = resolveClusterInfo(env, Topology{std::atoi(argv[1]), std::atoi(argv[2])});
    options.settings = commSettingsFromEnv(env);
    options.token = JobToken::fromEnv(env);
    options.version = "bench";
    options.encryptLoopback = curve;
    auto pg = joinProcessGroup(options);
    for (const auto& [bytes, iterations] : parsePlan(argv[3])) {
      const double seconds = secondsPerAllreduce(*pg, bytes, iterations);
      if (pg->rank() == 0) std::printf("%zu %.9g\n", bytes, seconds);
    }
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_allreduce: %s\n", e.what());
    return 1;
  }
}
