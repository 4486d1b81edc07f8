// ProcessGroup::alltoall and alltoallCounts, ranks as threads over the
// in-memory transport: uneven blocks (0, 1, 7, 4097 elements by pair) of
// every dtype for world sizes 1..8 checked element by element, large blocks
// in many chunks, the counts exchange a caller runs first; mismatched counts,
// collectives and aborts; observers and simulated groups. Subgroups:
// subgroups_test.cc; processes over loopback: multiprocess_test.cc; Open MPI:
// mpi_collectives_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <spdlog/fmt/fmt.h>

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
using test_support::AlltoallCase;
using test_support::expectAbortFailsTheOthers;
using test_support::messageOf;
using test_support::RecordingObserver;
using test_support::rethrowFirst;
using test_support::runRanks;
using test_support::smallChunks;
using test_support::unevenCount;

using Groups = std::vector<std::unique_ptr<ProcessGroup>>;
using CountOf = std::function<std::size_t(int src, int dst)>;

// Runs one alltoall of `dtype` on every group, rank s sending rank d
// count(s, d) elements; returns each rank's case, outputs filled in.
std::vector<AlltoallCase> alltoallOnEveryRank(Groups& groups, DType dtype, const CountOf& count) {
  std::vector<AlltoallCase> cases;
  const int n = static_cast<int>(groups.size());
  for (int r = 0; r < n; ++r) cases.emplace_back(dtype, r, n, count);
  rethrowFirst(runRanks(groups, [&](ProcessGroup& pg) {
    AlltoallCase& mine = cases[static_cast<std::size_t>(pg.rank())];
    pg.alltoall(mine.in(), mine.sendCounts, mine.out(), mine.recvCounts);
  }));
  return cases;
}

class AlltoallTest : public ::testing::TestWithParam<int> {
 protected:
  int worldSize() const { return GetParam(); }
};

TEST_P(AlltoallTest, UnevenBlocksOfEveryDtypeArriveElementByElement) {
  auto groups = makeInMemoryProcessGroups(worldSize(), smallChunks());
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kByte}) {
    for (int salt = 0; salt < 4; ++salt) {
      SCOPED_TRACE(::testing::Message() << dtypeName(dtype) << ", counts " << salt);
      const auto cases =
          alltoallOnEveryRank(groups, dtype, [salt](int src, int dst) { return unevenCount(src, dst, salt); });
      for (const auto& mine : cases) EXPECT_EQ(mine.mismatch(), "");
    }
  }
}

TEST_P(AlltoallTest, EmptyAndEqualBlocks) {
  auto groups = makeInMemoryProcessGroups(worldSize(), smallChunks());
  for (std::size_t count : {0ul, 1ul, 7ul, 4097ul}) {
    SCOPED_TRACE(::testing::Message() << count << " elements per pair");
    for (const auto& mine : alltoallOnEveryRank(groups, DType::kFloat32, [count](int, int) { return count; })) {
      EXPECT_EQ(mine.mismatch(), "");
    }
  }
}

// With the default 256 KiB chunks: blocks of up to 2 MiB stream as several
// chunks each, many in flight at once.
TEST_P(AlltoallTest, LargeBlocksWithTheDefaultChunks) {
  ProcessGroupOptions options;
  options.timeout = 30s;
  auto groups = makeInMemoryProcessGroups(worldSize(), options);
  const auto cases = alltoallOnEveryRank(groups, DType::kFloat32, [](int src, int dst) {
    constexpr std::size_t kCounts[] = {0, 65537, 524288, 3};
    return kCounts[static_cast<std::size_t>(src + 2 * dst) % 4];
  });
  for (const auto& mine : cases) EXPECT_EQ(mine.mismatch(), "");
}

// The expert-parallel pattern: each rank knows what it sends, learns what
// it receives from alltoallCounts, then moves the rows.
TEST_P(AlltoallTest, CountsExchangeThenRows) {
  auto groups = makeInMemoryProcessGroups(worldSize(), smallChunks());
  const int n = worldSize();
  const CountOf count = [](int src, int dst) { return unevenCount(src, dst, 1) + static_cast<std::size_t>(src); };
  std::vector<AlltoallCase> cases;
  for (int r = 0; r < n; ++r) cases.emplace_back(DType::kBFloat16, r, n, count);
  std::vector<std::vector<std::size_t>> learned(static_cast<std::size_t>(n));
  rethrowFirst(runRanks(groups, [&](ProcessGroup& pg) {
    AlltoallCase& mine = cases[static_cast<std::size_t>(pg.rank())];
    auto& recvCounts = learned[static_cast<std::size_t>(pg.rank())];
    recvCounts = pg.alltoallCounts(mine.sendCounts);
    pg.alltoall(mine.in(), mine.sendCounts, mine.out(), recvCounts);
  }));
  for (const auto& mine : cases) {
    EXPECT_EQ(learned[static_cast<std::size_t>(mine.rank)], mine.recvCounts) << "rank " << mine.rank;
    EXPECT_EQ(mine.mismatch(), "");
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, AlltoallTest, ::testing::Range(1, 9),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

TEST(AlltoallFailures, ReceiverThatExpectsAnotherCountNamesBothRanksAndCounts) {
  auto groups = makeInMemoryProcessGroups(3, smallChunks());
  auto errors = runRanks(groups, [&](ProcessGroup& pg) {
    // Rank 0 sends 8 elements to rank 2, which expects 7 from it.
    const CountOf count = [&](int src, int dst) -> std::size_t {
      return src == 0 && dst == 2 && pg.rank() == 2 ? 7 : 8;
    };
    AlltoallCase mine(DType::kFloat32, pg.rank(), pg.size(), count);
    pg.alltoall(mine.in(), mine.sendCounts, mine.out(), mine.recvCounts);
  });
  EXPECT_THAT(messageOf<CollectiveMismatchError>(errors[2]),
              HasSubstr("rank 2: alltoall #0 (float32): rank 0 sends 8 elements to rank 2, which expects 7 from it"));
  for (int r : {0, 1}) {  // done before rank 2 failed, or told of it
    const auto& error = errors[static_cast<std::size_t>(r)];
    if (error) {
      EXPECT_THAT(messageOf<PeerLostError>(error), HasSubstr("rank 2"));
    }
  }
}

TEST(AlltoallFailures, AnotherCollectiveIsNamedOnBothSides) {
  auto groups = makeInMemoryProcessGroups(2, smallChunks());
  auto errors = runRanks(groups, [&](ProcessGroup& pg) {
    std::vector<float> data(8, 1.0f);
    if (pg.rank() == 0) {
      std::vector<float> out(8);
      const std::vector<std::size_t> counts{4, 4};
      pg.alltoall(std::span<const float>(data), counts, std::span<float>(out), counts);
    } else {
      pg.allreduce(data, ReduceOp::kSum);
    }
  });
  EXPECT_THAT(messageOf<CollectiveMismatchError>(errors[0]),
              HasSubstr("rank 0: alltoall #0 (float32) does not match rank 1's allreduce #0 (sum, float32, 8 "
                        "elements, recursive doubling)"));
  EXPECT_THAT(messageOf<CommError>(errors[1]), HasSubstr("rank 1: allreduce #0"));
}

TEST(AlltoallFailures, AbortingRankFailsTheOthersWithPeerLostErrorNamingIt) {
  auto groups = makeInMemoryProcessGroups(4, smallChunks());
  std::vector<AlltoallCase> cases;
  for (int r = 0; r < 4; ++r) cases.emplace_back(DType::kFloat32, r, 4, [](int, int) { return std::size_t{4097}; });
  expectAbortFailsTheOthers(
      groups, 2, "router diverged",
      [&](ProcessGroup& pg) {
        AlltoallCase& mine = cases[static_cast<std::size_t>(pg.rank())];
        pg.alltoall(mine.in(), mine.sendCounts, mine.out(), mine.recvCounts);
      },
      [](int r) { return fmt::format("rank {}: alltoall #[01] \\(float32\\) failed", r); });
}

TEST(AlltoallFailures, RankThatSkipsItMakesTheOthersTimeOutNamingIt) {
  auto groups = makeInMemoryProcessGroups(2, smallChunks());
  auto errors = runRanks(groups, [&](ProcessGroup& pg) {
    if (pg.rank() == 1) return;
    AlltoallCase mine(DType::kFloat32, 0, 2, [](int, int) { return std::size_t{3}; });
    pg.alltoall(mine.in(), mine.sendCounts, mine.out(), mine.recvCounts, CollectiveOptions{.timeout = 200ms});
  });
  EXPECT_THAT(messageOf<CommTimeoutError>(errors[0]),
              HasSubstr("rank 0: alltoall #0 (float32) timed out after 200ms waiting for rank 1"));
}

TEST(AlltoallObservers, EachRankReportsTheElementsItSends) {
  auto groups = makeInMemoryProcessGroups(3, smallChunks());
  std::vector<std::shared_ptr<RecordingObserver>> observers;
  for (auto& pg : groups) pg->setObserver(observers.emplace_back(std::make_shared<RecordingObserver>()));
  alltoallOnEveryRank(groups, DType::kFloat32,
                      [](int src, int dst) { return static_cast<std::size_t>(src * 10 + dst); });
  for (std::size_t r = 0; r < 3; ++r) {
    const auto records = observers[r]->records();
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].kind, "alltoall");
    EXPECT_EQ(records[0].description, "alltoall #0 (float32)");
    EXPECT_EQ(records[0].count, 3 * r * 10 + 3);
    EXPECT_FALSE(records[0].failed);
  }
}

TEST(AlltoallObservers, SimulatedGroupMovesNothingAndAssumesBalancedCounts) {
  auto pg = makeSimulatedProcessGroup(1, 4);
  auto observer = std::make_shared<RecordingObserver>();
  pg->setObserver(observer);
  const std::vector<std::size_t> sendCounts{5, 0, 7, 1};
  const auto recvCounts = pg->alltoallCounts(sendCounts);
  EXPECT_EQ(recvCounts, sendCounts);
  BufferView nothing;
  nothing.count = 13;  // a simulated group's buffers may have no storage
  pg->alltoall(nothing, sendCounts, nothing, recvCounts);
  EXPECT_THAT(observer->descriptions(), ::testing::ElementsAre("alltoall #0 (byte)", "alltoall #1 (float32)"));
  EXPECT_EQ(observer->records()[1].count, 13u);
}

}  // namespace
}  // namespace hpu::comm
