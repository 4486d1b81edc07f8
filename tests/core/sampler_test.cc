// The epoch order and its distributed split: one seeded permutation per
// epoch, torch DistributedSampler's padding / drop_last (every rank the same
// count), and the property multi-device training rests on.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "hpu/core/data/sampler.h"
#include "hpu/core/base/random.h"

namespace hpu::core::data {
namespace {

using Indices = std::vector<std::int64_t>;

Indices iota(std::int64_t n) {
  Indices v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

SamplerOptions replica(int n, int rank, bool drop_last = false) {
  SamplerOptions o;
  o.num_replicas = n;
  o.rank = rank;
  o.drop_last = drop_last;
  return o;
}

TEST(Sampler, WithoutShuffleTheOrderIsSequential) {
  EXPECT_EQ(epochIndices(7, {}, 0), iota(7));
  EXPECT_EQ(epochIndices(7, {}, 3), iota(7));
  EXPECT_EQ(epochIndices(0, {}, 0), Indices{});
}

TEST(Sampler, ShuffleDrawsOneSeededPermutationPerEpoch) {
  SamplerOptions o;
  o.shuffle = true;
  o.seed = 42;
  const Indices e0 = epochIndices(100, o, 0), e1 = epochIndices(100, o, 1);
  Indices sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, iota(100)) << "a permutation";
  EXPECT_NE(e0, iota(100));
  EXPECT_NE(e0, e1) << "each epoch has its own order";
  EXPECT_EQ(epochIndices(100, o, 0), e0) << "a pure function of (seed, epoch)";
  // The documented derivation: the kShuffle stream of the seed, keyed by epoch.
  Generator g(42, RandomStream::kShuffle, 1);
  EXPECT_EQ(e1, randomPermutation(100, g));
  o.seed = 43;
  EXPECT_NE(epochIndices(100, o, 0), e0) << "another seed, another order";
}

// torch.utils.data.DistributedSampler(shuffle=False) on 10 samples, 4
// replicas: pads to 12 by repeating from the start (0, 1), then rank r takes
// r, r+4, r+8.
TEST(DistributedSampler, PadsByRepeatingFromTheStart) {
  EXPECT_EQ(samplesPerReplica(10, replica(4, 0)), 3);
  EXPECT_EQ(epochIndices(10, replica(4, 0), 0), (Indices{0, 4, 8}));
  EXPECT_EQ(epochIndices(10, replica(4, 1), 0), (Indices{1, 5, 9}));
  EXPECT_EQ(epochIndices(10, replica(4, 2), 0), (Indices{2, 6, 0}));
  EXPECT_EQ(epochIndices(10, replica(4, 3), 0), (Indices{3, 7, 1}));
  // Fewer samples than replicas: the data set repeats as often as needed.
  for (int r = 0; r < 8; ++r) EXPECT_EQ(epochIndices(3, replica(8, r), 0), (Indices{r % 3})) << "rank " << r;
}

TEST(DistributedSampler, DropLastDropsTheTail) {
  EXPECT_EQ(samplesPerReplica(10, replica(4, 0, true)), 2);
  EXPECT_EQ(epochIndices(10, replica(4, 0, true), 0), (Indices{0, 4}));
  EXPECT_EQ(epochIndices(10, replica(4, 3, true), 0), (Indices{3, 7}));
  EXPECT_EQ(epochIndices(3, replica(4, 0, true), 0), Indices{});
}

// Ranks run each batch's collectives together, so every rank gets the same
// count whatever the size (evaluation too); padded, every sample comes at
// least once.
TEST(DistributedSampler, EveryRankGetsTheSameCount) {
  for (int n = 1; n <= 8; ++n) {
    for (std::int64_t size : {0, 1, 6, 7, 4097}) {
      for (bool drop_last : {false, true}) {
        SCOPED_TRACE("world size " + std::to_string(n) + ", size " + std::to_string(size) +
                     (drop_last ? ", drop_last" : ""));
        std::multiset<std::int64_t> seen;
        const std::int64_t per = samplesPerReplica(size, replica(n, 0, drop_last));
        for (int r = 0; r < n; ++r) {
          const Indices mine = epochIndices(size, replica(n, r, drop_last), 0);
          EXPECT_EQ(static_cast<std::int64_t>(mine.size()), per) << "rank " << r;
          EXPECT_EQ(samplesPerReplica(size, replica(n, r, drop_last)), per) << "rank " << r;
          seen.insert(mine.begin(), mine.end());
        }
        EXPECT_EQ(per, drop_last || n == 1 ? size / n : (size + n - 1) / n);
        if (!drop_last) {
          for (std::int64_t i = 0; i < size; ++i) EXPECT_GE(seen.count(i), 1u) << "sample " << i;
        }
      }
    }
  }
  // Rank 0's share is never padded: positions 0, N, 2N, ... below the size.
  EXPECT_EQ(epochIndices(6, replica(8, 0), 0), (Indices{0}));
  EXPECT_EQ(epochIndices(6, replica(8, 6), 0), (Indices{0}));
  EXPECT_EQ(epochIndices(6, replica(8, 7), 0), (Indices{1}));
}

TEST(DistributedSampler, ShuffledRanksSplitTheSameEpochPermutation) {
  SamplerOptions single;
  single.shuffle = true;
  single.seed = 5;
  const Indices order = epochIndices(12, single, 2);
  for (int r = 0; r < 3; ++r) {
    SamplerOptions o = replica(3, r);
    o.shuffle = true;
    o.seed = 5;
    EXPECT_EQ(epochIndices(12, o, 2), (Indices{order[r], order[r + 3], order[r + 6], order[r + 9]})) << "rank " << r;
  }
}

// With per-rank batch B/N, the ranks' batches at global step t together hold
// exactly the samples of the single-device batch t: the samples of a step do
// not depend on the number of processes.
TEST(DistributedSampler, GlobalStepBatchesDoNotDependOnTheWorldSize) {
  const std::int64_t size = 96, batch = 8;
  for (std::int64_t epoch : {0, 1, 7}) {
    SamplerOptions one;
    one.shuffle = true;
    one.seed = 11;
    const Indices order = epochIndices(size, one, epoch);
    for (int n : {1, 2, 4}) {
      SCOPED_TRACE("epoch " + std::to_string(epoch) + ", world size " + std::to_string(n));
      std::vector<Indices> per_rank;
      for (int r = 0; r < n; ++r) {
        SamplerOptions o = replica(n, r);
        o.shuffle = true;
        o.seed = 11;
        per_rank.push_back(epochIndices(size, o, epoch));
      }
      const std::int64_t local = batch / n;
      for (std::int64_t t = 0; t < size / batch; ++t) {
        std::multiset<std::int64_t> global(order.begin() + t * batch, order.begin() + (t + 1) * batch), union_of_ranks;
        for (const Indices& mine : per_rank)
          union_of_ranks.insert(mine.begin() + t * local, mine.begin() + (t + 1) * local);
        ASSERT_EQ(union_of_ranks, global) << "step " << t;
      }
    }
  }
}

}  // namespace
}  // namespace hpu::core::data
