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
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "bench_job.h"

int main(int argc, char** argv) {
  const bool curve = argc == 5 && std::string(argv[4]) == "--curve";
  if (argc != 4 && !curve) {
    std::fprintf(stderr, "usage: bench_allreduce <devices> <num_nodes> <bytes:iterations,...> [--curve]\n");
    return 64;
  }
  spdlog::set_level(spdlog::level::warn);  // stdout is the result
  try {
    auto pg = hpu::comm::bench::joinBenchJob(std::atoi(argv[1]), std::atoi(argv[2]), curve);
    for (const auto& [bytes, iterations] : hpu::comm::bench::parsePlan(argv[3])) {
      std::vector<float> data(bytes / sizeof(float), 0.0f);
      const double seconds = hpu::comm::bench::secondsPerCall(
          *pg, iterations, [&] { pg->allreduce(data, hpu::comm::ReduceOp::kSum); });
      if (pg->rank() == 0) std::printf("%zu %.9g\n", bytes, seconds);
    }
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_allreduce: %s\n", e.what());
    return 1;
  }
}
