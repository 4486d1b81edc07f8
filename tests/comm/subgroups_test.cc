// Process subgroups (ProcessGroup::split), ranks as threads over the
// in-memory transport: every collective (alltoall too) on the tensor-parallel groups
// {0,1},{2,3} and the data-parallel groups {0,2},{1,3} of 4 ranks, and on 3
// of 4 ranks, against the serial reference over the members' inputs;
// synchronous and asynchronous collectives of three groups interleaved;
// layouts across nodes; bad rank lists; failures; simulated groups.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>

#include "hpu/comm/errors.h"
#include "hpu/comm/in_memory.h"
#include "hpu/comm/simulated.h"
#include "rank_threads.h"
#include "recording_observer.h"
#include "reference.h"

namespace hpu::comm {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using hpu::comm::test_support::AlltoallCase;
using hpu::comm::test_support::exactInput;
using hpu::comm::test_support::messageOf;
using hpu::comm::test_support::RecordingObserver;
using hpu::comm::test_support::referenceValue;
using hpu::comm::test_support::rethrowFirst;
using hpu::comm::test_support::runRanks;
using hpu::comm::test_support::smallChunks;
using hpu::comm::test_support::TypedBuffer;
using hpu::comm::test_support::unevenCount;

using Groups = std::vector<std::unique_ptr<ProcessGroup>>;
// The ranks of the job's group in the subgroup of `rank` (ascending); empty
// when `rank` is in none.
using Members = std::function<std::vector<int>(int rank)>;

constexpr std::size_t kSizes[] = {0, 1, 7, 4097};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax};
constexpr DType kReducible[] = {DType::kFloat32, DType::kBFloat16};

// TP=2 x DP=2 on 4 ranks.
std::vector<int> tensorParallel(int rank) { return {rank / 2 * 2, rank / 2 * 2 + 1}; }
std::vector<int> dataParallel(int rank) { return {rank % 2, rank % 2 + 2}; }

// Each rank's subgroup (index: the rank in `world`; null for ranks in none).
Groups splitEach(Groups& world, const Members& members) {
  Groups subgroups;
  for (auto& pg : world) {
    const auto ranks = members(pg->rank());
    subgroups.push_back(ranks.empty() ? nullptr : pg->split(ranks));
  }
  return subgroups;
}

// Calls body(subgroup, rank in the job) on every rank that has a subgroup,
// each on its own thread; rethrows the first rank's error.
void onSubgroups(Groups& world, Groups& subgroups, const std::function<void(ProcessGroup&, int)>& body) {
  rethrowFirst(runRanks(world, [&](ProcessGroup& pg) {
    if (auto& mine = subgroups[static_cast<std::size_t>(pg.rank())]) body(*mine, pg.rank());
  }));
}

// Every collective on the subgroups of `members`: each rank r's input is
// exactInput(r, i) of the job's rank r, each result is compared with the
// serial reference over the members' inputs.
void expectCollectivesMatchTheReference(Groups& world, const Members& members) {
  auto subgroups = splitEach(world, members);
  const int ranks = static_cast<int>(world.size());
  const auto inSubgroup = [&](int r) { return subgroups[static_cast<std::size_t>(r)] != nullptr; };
  const int subgroupSize = (*std::ranges::find_if(subgroups, [](const auto& pg) { return pg != nullptr; }))->size();
  for (Algorithm algorithm : {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kHalvingDoubling}) {
    for (DType dtype : kReducible) {
      for (ReduceOp op : kOps) {
        for (std::size_t count : kSizes) {
          SCOPED_TRACE(::testing::Message() << "allreduce, algorithm " << static_cast<int>(algorithm) << " dtype "
                                            << dtypeName(dtype) << " op " << reduceOpName(op) << " count " << count);
          std::vector<TypedBuffer> buffers;
          for (int r = 0; r < ranks; ++r) buffers.emplace_back(dtype, count, r);
          onSubgroups(world, subgroups, [&](ProcessGroup& pg, int r) {
            pg.allreduce(buffers[static_cast<std::size_t>(r)].view(),
                         AllreduceOptions{.op = op, .algorithm = algorithm});
          });
          for (int r = 0; r < ranks; ++r) {
            if (!inSubgroup(r)) continue;
            for (std::size_t i = 0; i < count; ++i) {
              ASSERT_EQ(buffers[static_cast<std::size_t>(r)].at(i), referenceValue(op, dtype, members(r), i))
                  << "rank " << r << " element " << i;
            }
          }
        }
      }
    }
  }
  for (std::size_t count : kSizes) {
    SCOPED_TRACE(::testing::Message() << "count " << count);
    for (int root = 0; root < subgroupSize; ++root) {
      std::vector<TypedBuffer> buffers;
      for (int r = 0; r < ranks; ++r) buffers.emplace_back(DType::kFloat32, count, r);
      onSubgroups(world, subgroups, [&](ProcessGroup& pg, int r) {
        pg.broadcast(buffers[static_cast<std::size_t>(r)].view(), root);
      });
      for (int r = 0; r < ranks; ++r) {
        if (!inSubgroup(r)) continue;
        EXPECT_EQ(buffers[static_cast<std::size_t>(r)].bytes(),
                  TypedBuffer(DType::kFloat32, count, members(r)[static_cast<std::size_t>(root)]).bytes())
            << "broadcast from root " << root << " to rank " << r;
      }
    }
    std::vector<std::vector<float>> gathered(static_cast<std::size_t>(ranks), std::vector<float>(count, -99.0f));
    onSubgroups(world, subgroups, [&](ProcessGroup& pg, int r) {
      const auto shard = ProcessGroup::shardRange(count, pg.size(), pg.rank());
      std::vector<float> input(shard.size);
      for (std::size_t j = 0; j < shard.size; ++j) input[j] = exactInput(r, shard.offset + j);
      pg.allgather(std::span<const float>(input), std::span<float>(gathered[static_cast<std::size_t>(r)]));
    });
    for (int r = 0; r < ranks; ++r) {
      if (!inSubgroup(r)) continue;
      const auto group = members(r);
      for (std::size_t owner = 0; owner < group.size(); ++owner) {
        const auto shard = ProcessGroup::shardRange(count, static_cast<int>(group.size()), static_cast<int>(owner));
        for (std::size_t i = shard.offset; i < shard.offset + shard.size; ++i) {
          ASSERT_EQ(gathered[static_cast<std::size_t>(r)][i], exactInput(group[owner], i))
              << "allgather, rank " << r << " element " << i;
        }
      }
    }
    for (ReduceOp op : kOps) {
      std::vector<TypedBuffer> inputs;
      std::vector<TypedBuffer> outputs;
      for (int r = 0; r < ranks; ++r) {
        const ProcessGroup* pg = subgroups[static_cast<std::size_t>(r)].get();
        inputs.emplace_back(DType::kFloat32, count, r);
        outputs.emplace_back(DType::kFloat32, pg ? ProcessGroup::shardRange(count, pg->size(), pg->rank()).size : 0, r);
      }
      onSubgroups(world, subgroups, [&](ProcessGroup& pg, int r) {
        pg.reduceScatter(inputs[static_cast<std::size_t>(r)].view(), outputs[static_cast<std::size_t>(r)].view(), op);
      });
      for (int r = 0; r < ranks; ++r) {
        if (!inSubgroup(r)) continue;
        const auto& pg = *subgroups[static_cast<std::size_t>(r)];
        const auto shard = ProcessGroup::shardRange(count, pg.size(), pg.rank());
        for (std::size_t j = 0; j < shard.size; ++j) {
          ASSERT_EQ(outputs[static_cast<std::size_t>(r)].at(j),
                    referenceValue(op, DType::kFloat32, members(r), shard.offset + j))
              << "reduce_scatter " << reduceOpName(op) << ", rank " << r << " element " << j;
        }
      }
    }
  }
  for (int salt = 0; salt < 4; ++salt) {
    std::vector<std::unique_ptr<AlltoallCase>> cases(static_cast<std::size_t>(ranks));
    onSubgroups(world, subgroups, [&](ProcessGroup& pg, int r) {
      auto& mine = cases[static_cast<std::size_t>(r)];
      mine = std::make_unique<AlltoallCase>(DType::kFloat32, pg.rank(), pg.size(),
                                            [salt](int src, int dst) { return unevenCount(src, dst, salt); });
      pg.alltoall(mine->in(), mine->sendCounts, mine->out(), mine->recvCounts);
    });
    for (const auto& mine : cases) {
      if (mine) {
        EXPECT_EQ(mine->mismatch(), "") << "alltoall, counts " << salt;
      }
    }
  }
}

TEST(Subgroups, SplitMapsRanksInTheListedOrder) {
  auto world = makeInMemoryProcessGroups(4, smallChunks());
  auto tp = splitEach(world, tensorParallel);
  auto dp = splitEach(world, dataParallel);
  for (int r = 0; r < 4; ++r) {
    const auto i = static_cast<std::size_t>(r);
    EXPECT_EQ(tp[i]->size(), 2);
    EXPECT_EQ(tp[i]->rank(), r % 2);
    EXPECT_EQ(dp[i]->size(), 2);
    EXPECT_EQ(dp[i]->rank(), r / 2);
  }
}

TEST(Subgroups, TensorParallelGroupsMatchTheReference) {
  auto world = makeInMemoryProcessGroups(4, smallChunks());
  expectCollectivesMatchTheReference(world, tensorParallel);
}

TEST(Subgroups, DataParallelGroupsMatchTheReference) {
  auto world = makeInMemoryProcessGroups(4, smallChunks());
  expectCollectivesMatchTheReference(world, dataParallel);
}

TEST(Subgroups, ThreeOfFourRanksMatchTheReference) {
  auto world = makeInMemoryProcessGroups(4, smallChunks());
  expectCollectivesMatchTheReference(world,
                                     [](int rank) { return rank == 2 ? std::vector<int>{} : std::vector{0, 1, 3}; });
}

TEST(Subgroups, ASubgroupOfASubgroupMapsItsRanksThroughBoth) {
  auto world = makeInMemoryProcessGroups(4, smallChunks());
  auto upper = splitEach(world, [](int rank) { return rank == 0 ? std::vector<int>{} : std::vector{1, 2, 3}; });
  Groups inner;  // ranks 0 and 2 of {1,2,3}: the job's ranks 1 and 3
  for (auto& pg : upper) inner.push_back(pg && pg->rank() != 1 ? pg->split({0, 2}) : nullptr);
  std::vector<std::vector<float>> data(4, std::vector<float>(5));
  for (int r = 0; r < 4; ++r) {
    for (std::size_t i = 0; i < 5; ++i) data[static_cast<std::size_t>(r)][i] = exactInput(r, i);
  }
  onSubgroups(world, inner, [&](ProcessGroup& pg, int r) {
    EXPECT_EQ(pg.rank(), r / 2);
    pg.allreduce(data[static_cast<std::size_t>(r)], ReduceOp::kSum);
  });
  for (int r : {1, 3}) {
    for (std::size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(data[static_cast<std::size_t>(r)][i],
                referenceValue(ReduceOp::kSum, DType::kFloat32, std::vector{1, 3}, i));
    }
  }
}

// Every rank issues, in one order: an asynchronous DP allreduce, a
// synchronous TP allreduce, and now and then a job-wide asynchronous
// allreduce or barrier. The three groups share each rank's lane, so their
// collectives run one at a time in the order issued, and the sums are exact.
TEST(Subgroups, InterleavedCollectivesOfThreeGroupsRunOneAtATimeInOrder) {
  constexpr int kRounds = 12;
  auto world = makeInMemoryProcessGroups(4, smallChunks());
  auto tp = splitEach(world, tensorParallel);
  auto dp = splitEach(world, dataParallel);
  std::vector<std::shared_ptr<RecordingObserver>> observers;
  for (std::size_t r = 0; r < 4; ++r) {
    observers.push_back(std::make_shared<RecordingObserver>());
    for (auto* pg : {world[r].get(), tp[r].get(), dp[r].get()}) pg->setObserver(observers.back());
  }
  // [rank][round]
  std::vector<std::vector<std::vector<float>>> tpData(4), dpData(4), worldData(4);
  for (int r = 0; r < 4; ++r) {
    for (int k = 0; k < kRounds; ++k) {
      const auto n = static_cast<std::size_t>(300 + 97 * k);
      tpData[static_cast<std::size_t>(r)].emplace_back(n, float(10 * r + k));
      dpData[static_cast<std::size_t>(r)].emplace_back(n + 1, float(r + k));
      worldData[static_cast<std::size_t>(r)].emplace_back(n + 2, float(100 * r + k));
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  rethrowFirst(runRanks(world, [&](ProcessGroup& pg) {
    const auto r = static_cast<std::size_t>(pg.rank());
    std::vector<Work> works;
    for (std::size_t k = 0; k < kRounds; ++k) {
      works.push_back(dp[r]->allreduceAsync(dpData[r][k], ReduceOp::kSum));
      tp[r]->allreduce(tpData[r][k], ReduceOp::kSum);
      if (k % 3 == 0) works.push_back(pg.allreduceAsync(worldData[r][k], ReduceOp::kSum));
      if (k % 4 == 1) pg.barrier("round");
    }
    for (const auto& work : works) work.wait(deadline);
  }));
  for (int r = 0; r < 4; ++r) {
    const auto i = static_cast<std::size_t>(r);
    for (int k = 0; k < kRounds; ++k) {
      const auto round = static_cast<std::size_t>(k);
      float tpSum = 0, dpSum = 0;
      for (int m : tensorParallel(r)) tpSum += float(10 * m + k);
      for (int m : dataParallel(r)) dpSum += float(m + k);
      EXPECT_THAT(tpData[i][round], ::testing::Each(tpSum)) << "TP, rank " << r << " round " << k;
      EXPECT_THAT(dpData[i][round], ::testing::Each(dpSum)) << "DP, rank " << r << " round " << k;
      if (k % 3 == 0) {
        EXPECT_THAT(worldData[i][round], ::testing::Each(float(600 + 4 * k))) << "job, rank " << r << " round " << k;
      }
    }
    // One at a time: each collective began after the one before it ended;
    // each group's in its own order.
    auto records = observers[i]->records();
    std::sort(records.begin(), records.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
    ASSERT_EQ(records.size(), std::size_t{kRounds * 2 + 4 + 3});
    std::map<std::string, std::uint64_t> nextSequence;
    for (std::size_t j = 0; j < records.size(); ++j) {
      const auto& record = records[j];
      if (j > 0) {
        EXPECT_GE(record.begin, records[j - 1].end) << record.description << " on rank " << r;
      }
      EXPECT_FALSE(record.failed);
      // The job's group has 4 ranks; of the groups of 2, DP issues only asynchronous collectives, TP none.
      const std::string group = record.groupSize == 4 ? "job" : record.async ? "DP" : "TP";
      EXPECT_EQ(record.sequence, nextSequence[group]++) << group << " " << record.description << " on rank " << r;
    }
  }
}

std::string splitError(ProcessGroup& pg, std::vector<int> ranks) {
  try {
    pg.split(std::move(ranks));
  } catch (const CommError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Subgroups, BadRankListsAreRejectedNamingTheList) {
  auto world = makeInMemoryProcessGroups(4, smallChunks());
  ProcessGroup& pg = *world[1];
  EXPECT_EQ(splitError(pg, {1, 0}),
            "rank 1: cannot split ranks [1, 0] from a process group of 4: rank 0 follows rank 1; list the ranks "
            "ascending");
  EXPECT_EQ(splitError(pg, {1, 1, 2}), "rank 1: cannot split ranks [1, 1, 2] from a process group of 4: rank 1 is "
                                       "listed twice");
  EXPECT_EQ(splitError(pg, {1, 4}), "rank 1: cannot split ranks [1, 4] from a process group of 4: rank 4 is not in "
                                    "the group (its ranks are 0 to 3)");
  EXPECT_EQ(splitError(pg, {-1, 1}), "rank 1: cannot split ranks [-1, 1] from a process group of 4: rank -1 is not "
                                     "in the group (its ranks are 0 to 3)");
  EXPECT_EQ(splitError(pg, {0, 2}), "rank 1: cannot split ranks [0, 2] from a process group of 4: this rank (1) is "
                                    "not among them; only the ranks of a subgroup call split, each with the same list");
  EXPECT_EQ(splitError(pg, {}), "rank 1: cannot split ranks [] from a process group of 4: this rank (1) is not among "
                                "them; only the ranks of a subgroup call split, each with the same list");
}

// Ranks 0 and 1 disagree in their TP group: the mismatch poisons their
// lanes, so their job-wide and DP collectives rethrow it, and ranks 2 and 3
// learn at once (not at a timeout) that a rank failed.
TEST(Subgroups, FailureInASubgroupPoisonsEveryGroupOfTheRank) {
  auto world = makeInMemoryProcessGroups(4, smallChunks());
  auto tp = splitEach(world, tensorParallel);
  auto dp = splitEach(world, dataParallel);
  std::vector<std::string> tpErrors(4);
  const auto start = std::chrono::steady_clock::now();
  auto errors = runRanks(world, [&](ProcessGroup& pg) {
    const auto r = static_cast<std::size_t>(pg.rank());
    if (r < 2) {
      std::vector<float> data(r == 1 ? 12 : 10, 1.0f);
      try {
        tp[r]->allreduce(data, ReduceOp::kSum);
      } catch (const CollectiveMismatchError& e) {
        tpErrors[r] = e.what();
      }
      const Work work = dp[r]->allreduceAsync(data, ReduceOp::kSum);
      try {
        work.wait(10s);
        ADD_FAILURE() << "rank " << r << ": a DP allreduce after the failure succeeded";
      } catch (const CollectiveMismatchError& e) {
        EXPECT_EQ(e.what(), tpErrors[r]);
      }
    }
    pg.barrier("after_tp");
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  for (std::size_t r : {0u, 1u}) {
    EXPECT_THAT(tpErrors[r], HasSubstr("does not match rank"));
    EXPECT_EQ(messageOf<CollectiveMismatchError>(errors[r]), tpErrors[r]) << "rank " << r;
  }
  for (std::size_t r : {2u, 3u}) {
    EXPECT_THAT(messageOf<PeerLostError>(errors[r]), HasSubstr("barrier #0 'after_tp' failed")) << "rank " << r;
  }
}

TEST(Subgroups, AbortingASubgroupAbortsTheRankInEveryGroup) {
  auto world = makeInMemoryProcessGroups(2, smallChunks());
  auto whole = splitEach(world, [](int) { return std::vector{0, 1}; });
  auto errors = runRanks(world, [&](ProcessGroup& pg) {
    if (pg.rank() == 1) whole[1]->abort("out of device memory");
    std::vector<float> data(4, 1.0f);
    pg.allreduce(data, ReduceOp::kSum);
  });
  EXPECT_THAT(messageOf<CommError>(errors[1]),
              HasSubstr("rank 1: the process group was aborted: out of device memory"));
  EXPECT_THAT(messageOf<PeerLostError>(errors[0]), HasSubstr("rank 1 aborted: out of device memory"));
}

// An allreduce on the subgroups of `members` of 8 ranks, two per node,
// gives the reference sums and is hierarchical or not as expected.
void expectAllreduceAcrossNodes(const Members& members, bool hierarchical) {
  auto world = makeInMemoryProcessGroups(8, smallChunks(), /*ranksPerNode=*/2);
  auto subgroups = splitEach(world, members);
  auto observer = std::make_shared<RecordingObserver>();
  subgroups[0]->setObserver(observer);
  std::vector<TypedBuffer> buffers;
  for (int r = 0; r < 8; ++r) buffers.emplace_back(DType::kFloat32, 4097, r);
  onSubgroups(world, subgroups,
              [&](ProcessGroup& pg, int r) { pg.allreduce(buffers[static_cast<std::size_t>(r)].view()); });
  for (int r = 0; r < 8; ++r) {
    for (std::size_t i = 0; i < 4097; ++i) {
      ASSERT_EQ(buffers[static_cast<std::size_t>(r)].at(i),
                referenceValue(ReduceOp::kSum, DType::kFloat32, members(r), i))
          << "rank " << r << " element " << i;
    }
  }
  const auto descriptions = observer->descriptions();
  ASSERT_EQ(descriptions.size(), 1u);
  EXPECT_EQ(descriptions[0].find("hierarchical") != std::string::npos, hierarchical) << descriptions[0];
}

// Ranks 0,1 | 2,3 | 4,5 | 6,7 share nodes: {0,1,4,5} is two nodes of two
// ranks, so its collectives are hierarchical; {0,2,4,6} is one rank per
// node, so its are flat.
TEST(Subgroups, SubgroupsSeeTheNodesOfTheirRanks) {
  expectAllreduceAcrossNodes([](int r) { return r % 4 < 2 ? std::vector{0, 1, 4, 5} : std::vector{2, 3, 6, 7}; },
                             /*hierarchical=*/true);
  expectAllreduceAcrossNodes([](int r) { return r % 2 == 0 ? std::vector{0, 2, 4, 6} : std::vector{1, 3, 5, 7}; },
                             /*hierarchical=*/false);
}

TEST(Subgroups, SimulatedSubgroupsReportTheirSizeToTheirOwnObservers) {
  auto world = makeSimulatedProcessGroup(5, 8);
  auto tp = world->split({4, 5, 6, 7});
  auto dp = world->split({1, 5});
  auto tpHalf = tp->split({0, 1});
  EXPECT_EQ(tp->rank(), 1);
  EXPECT_EQ(tp->size(), 4);
  EXPECT_EQ(dp->rank(), 1);
  EXPECT_EQ(dp->size(), 2);
  EXPECT_EQ(tpHalf->rank(), 1);
  EXPECT_EQ(tpHalf->size(), 2);
  auto worldObserver = std::make_shared<RecordingObserver>();
  auto tpObserver = std::make_shared<RecordingObserver>();
  world->setObserver(worldObserver);
  tp->setObserver(tpObserver);
  std::vector<float> data(1024);
  tp->allreduce(data, ReduceOp::kSum);
  tp->allreduceAsync(data, ReduceOp::kSum).wait(1s);
  dp->allreduce(data, ReduceOp::kAvg);
  tpHalf->barrier("half");
  world->allreduce(data, ReduceOp::kSum);

  const auto tpRecords = tpObserver->records();
  ASSERT_EQ(tpRecords.size(), 2u);
  for (std::uint64_t i = 0; i < 2; ++i) {
    EXPECT_EQ(tpRecords[i].groupSize, 4);
    EXPECT_EQ(tpRecords[i].sequence, i);
    EXPECT_EQ(tpRecords[i].async, i == 1);
  }
  const auto worldRecords = worldObserver->records();
  ASSERT_EQ(worldRecords.size(), 1u);
  EXPECT_EQ(worldRecords[0].groupSize, 8);
  EXPECT_EQ(worldRecords[0].sequence, 0u);  // the subgroups' collectives are not the job's
  EXPECT_EQ(worldRecords[0].description, "allreduce #0 (sum, float32, 1024 elements, recursive doubling)");
}

}  // namespace
}  // namespace hpu::comm
