// One rank of the alltoall benchmark; bench/comm/alltoall_vs.py starts N of
// them (and as many of Open MPI's) and compares.
//
//   bench_alltoall <devices> <num_nodes> <plan>
//
// The job comes from the environment as for bench_allreduce: devices = N,
// num_nodes = 1 puts every rank on one node (shared memory between them),
// devices = 1, num_nodes = N makes each rank its own node (tcp:// on
// loopback). <plan> is "bytes:iterations,...", bytes being what each rank
// sends (and receives): float32 blocks of bytes / 4 / N elements, one per
// rank, its own included, as MPI_Alltoall moves them. For each entry the
// iterations are timed after 10% (at least 2) untimed warm-up runs and a
// barrier; each rank's mean time per alltoall is max-reduced, and rank 0
// prints "<bytes> <seconds per alltoall>" on stdout.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "bench_job.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: bench_alltoall <devices> <num_nodes> <bytes:iterations,...>\n");
    return 64;
  }
  spdlog::set_level(spdlog::level::warn);  // stdout is the result
  try {
    auto pg = hpu::comm::bench::joinBenchJob(std::atoi(argv[1]), std::atoi(argv[2]), /*curve=*/false);
    const auto n = static_cast<std::size_t>(pg->size());
    for (const auto& [bytes, iterations] : hpu::comm::bench::parsePlan(argv[3])) {
      const std::vector<std::size_t> counts(n, bytes / sizeof(float) / n);
      std::vector<float> input(counts[0] * n, 1.0f), output(input.size());
      const double seconds = hpu::comm::bench::secondsPerCall(*pg, iterations, [&] {
        pg->alltoall(std::span<const float>(input), counts, std::span<float>(output), counts);
      });
      if (pg->rank() == 0) std::printf("%zu %.9g\n", bytes, seconds);
    }
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_alltoall: %s\n", e.what());
    return 1;
  }
}
