// Which samples a rank visits in an epoch, in which order.
//
// Shuffling draws ONE permutation per epoch from (seed, epoch); a distributed
// run splits it across ranks the way torch's DistributedSampler does (pad
// by repeating from the start, or drop the tail, then rank r takes positions
// r, r+N, r+2N, ...). Consequently, with per-rank batch B/N, the samples of
// global step t are the same set for every world size N — the property the
// single-device/multi-device equivalence rests on.
#pragma once

#include <cstdint>
#include <vector>

namespace hpu::core::data {

struct SamplerOptions {
  bool shuffle = false;
  std::uint64_t seed = 0;
  int num_replicas = 1;
  int rank = 0;
  // Distributed only: drop the tail so every rank gets the same count
  // (otherwise pad by repeating samples from the start). Either way every
  // rank gets the same count: ranks run their batches' collectives together.
  bool drop_last = false;
};

// This rank's sample indices for `epoch` of a data set of `size` samples.
std::vector<std::int64_t> epochIndices(std::int64_t size, const SamplerOptions& options,
                                       std::int64_t epoch);

// How many indices epochIndices returns.
std::int64_t samplesPerReplica(std::int64_t size, const SamplerOptions& options);

}  // namespace hpu::core::data
