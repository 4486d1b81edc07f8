// Shape-only groups (a dry run): collectives on buffers without storage move
// nothing, those on host values still travel, and checkSchedules names the
// rank, the group and the first collective where a rank parts from its
// group's first rank. Ranks as threads over the in-memory transport.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hpu/comm/in_memory.h"
#include "rank_threads.h"

namespace hpu::comm {
namespace {

using test_support::runRanks;
using ::testing::HasSubstr;

ProcessGroupOptions shapeOnly() {
  ProcessGroupOptions options = test_support::smallChunks();
  options.shapeOnly = true;
  return options;
}

// A buffer of `count` floats without storage, as a shape-only tensor's.
BufferView noStorage(std::size_t count) {
  BufferView view;
  view.count = count;
  return view;
}

TEST(CollectiveScheduleTest, ShapeOnlyBuffersMoveNothingAndHostValuesTravel) {
  auto groups = makeInMemoryProcessGroups(4, shapeOnly());
  std::vector<ScheduleCheck> checks(4);
  const auto errors = runRanks(groups, [&](ProcessGroup& g) {
    g.allreduce(noStorage(1 << 20));
    g.broadcast(noStorage(4097), 1);
    g.allgather(ConstBufferView(noStorage(2)), noStorage(8));
    std::vector<float> value{static_cast<float>(g.rank() + 1)};
    g.allreduce(value, ReduceOp::kSum);
    EXPECT_EQ(value[0], 10.0f);  // a host value travels for real
    checks[static_cast<std::size_t>(g.rank())] = g.checkSchedules(ProcessGroup::Clock::now() + std::chrono::seconds(10));
  });
  test_support::rethrowFirst(errors);
  for (const ScheduleCheck& c : checks) {
    EXPECT_EQ(c.groups, 1);
    EXPECT_EQ(c.collectives, 4u);
  }
}

TEST(CollectiveScheduleTest, SubgroupsAreCheckedAndADifferenceIsNamed) {
  auto groups = makeInMemoryProcessGroups(4, shapeOnly());
  const auto errors = runRanks(groups, [&](ProcessGroup& g) {
    // Groups {0,2} and {1,3}; rank 3 reduces another size than rank 1 in
    // its subgroup's second collective.
    auto pair = g.split(g.rank() % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3});
    g.allreduce(noStorage(64));
    pair->allreduce(noStorage(16));
    pair->allreduce(noStorage(g.rank() == 3 ? 33 : 32));
    const ScheduleCheck c = g.checkSchedules(ProcessGroup::Clock::now() + std::chrono::seconds(10));
    EXPECT_EQ(c.groups, 2);
    EXPECT_EQ(c.collectives, 3u);
  });
  for (int r : {0, 1, 2}) EXPECT_EQ(errors[static_cast<std::size_t>(r)], nullptr) << "rank " << r;
  ASSERT_NE(errors[3], nullptr);
  try {
    std::rethrow_exception(errors[3]);
  } catch (const CollectiveMismatchError& e) {
    EXPECT_STREQ(e.what(),
                 "rank 3: the collectives of its group of ranks 1,3 differ from that group's first rank's (rank 1): "
                 "its collective 1 is allreduce #1 (sum, float32, 33 elements, recursive doubling) where rank 1 "
                 "issued allreduce #1 (sum, float32, 32 elements, recursive doubling)");
  }
}

TEST(CollectiveScheduleTest, AMissingCollectiveIsNamedByCount) {
  auto groups = makeInMemoryProcessGroups(2, shapeOnly());
  const auto errors = runRanks(groups, [&](ProcessGroup& g) {
    g.barrier("epoch");
    if (g.rank() == 0) g.broadcast(noStorage(8), 0);
    g.checkSchedules(ProcessGroup::Clock::now() + std::chrono::seconds(10));
  });
  EXPECT_EQ(errors[0], nullptr);
  ASSERT_NE(errors[1], nullptr);
  try {
    std::rethrow_exception(errors[1]);
  } catch (const CollectiveMismatchError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rank 1: the collectives of its group of ranks 0,1 differ from that group's first "
                                    "rank's (rank 0): this rank issued 1 collective(s), rank 0 issued 2; the first 1 agree"));
  }
}

}  // namespace
}  // namespace hpu::comm
