// pipelineOrder: every stage's actions of 1F1B and of its interleaved form,
// run together as the stages run them (a send never waits; a receive waits
// for its sender), finish for every layout and step length, each forward
// and backward once, with Megatron-LM's warm-up and its memory bound.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "hpu/core/strategies/pipeline_order.h"

namespace hpu::core {
namespace {

using Order = std::vector<PipelineAction>;

Order order(int stage, int stages, int chunks, std::size_t micro_batches, bool backward = true) {
  return pipelineOrder(stage, stages, chunks, micro_batches, backward);
}

// Runs every stage's order until none can go on: chunk c of stage s is
// virtual stage v = c x stages + s; a forward needs virtual stage v - 1's
// forward of its micro-batch, a backward virtual stage v + 1's backward.
// Returns whether every stage ran all its actions.
bool runsToTheEnd(int stages, int chunks, std::size_t micro_batches, bool backward = true) {
  std::vector<Order> orders;
  for (int s = 0; s < stages; ++s) orders.push_back(order(s, stages, chunks, micro_batches, backward));
  std::vector<std::size_t> at(static_cast<std::size_t>(stages), 0);
  std::set<std::tuple<bool, int, std::size_t>> done;  // (forward, virtual stage, micro-batch)
  const int last = stages * chunks - 1;
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < stages; ++s) {
      auto& i = at[static_cast<std::size_t>(s)];
      const Order& o = orders[static_cast<std::size_t>(s)];
      for (; i < o.size(); ++i) {
        const PipelineAction& a = o[i];
        const int v = a.chunk * stages + s;
        if (a.forward && v > 0 && !done.count({true, v - 1, a.micro_batch})) break;
        if (!a.forward && v < last && !done.count({false, v + 1, a.micro_batch})) break;
        if (!a.forward) EXPECT_TRUE(done.count({true, v, a.micro_batch})) << "a backward before its forward";
        done.insert({a.forward, v, a.micro_batch});
        moved = true;
      }
    }
  }
  for (int s = 0; s < stages; ++s)
    if (at[static_cast<std::size_t>(s)] != orders[static_cast<std::size_t>(s)].size()) return false;
  return true;
}

TEST(PipelineOrderTest, EveryLayoutAndStepLengthRunsToTheEnd) {
  for (int stages = 1; stages <= 8; ++stages)
    for (int chunks = 1; chunks <= 4; ++chunks)
      for (std::size_t m = 1; m <= 20; ++m) {
        EXPECT_TRUE(runsToTheEnd(stages, chunks, m)) << stages << " stages, " << chunks << " chunks, " << m;
        EXPECT_TRUE(runsToTheEnd(stages, chunks, m, /*backward=*/false)) << stages << " x " << chunks << ", " << m;
      }
}

TEST(PipelineOrderTest, EachChunkRunsEachMicroBatchOnceEachWay) {
  for (const auto& [stages, chunks, m] : std::vector<std::tuple<int, int, std::size_t>>{{2, 2, 4}, {4, 2, 8}, {3, 3, 7}}) {
    for (int s = 0; s < stages; ++s) {
      std::map<std::tuple<bool, int, std::size_t>, int> seen;
      for (const PipelineAction& a : order(s, stages, chunks, m)) ++seen[{a.forward, a.chunk, a.micro_batch}];
      EXPECT_EQ(seen.size(), 2 * static_cast<std::size_t>(chunks) * m);
      for (const auto& [key, count] : seen) EXPECT_EQ(count, 1);
    }
  }
}

// Megatron-LM's interleaved schedule on 2 stages, 2 chunks, 4 micro-batches:
// forwards in groups of 2 through chunk 0 then chunk 1; stage 0 warms up
// with (2 - 0 - 1) x 2 + (2 - 1) x 2 = 4 forwards, stage 1 with 2.
TEST(PipelineOrderTest, InterleavedOrderIsMegatronsOnTwoStages) {
  const auto f = [](int c, std::size_t i) { return PipelineAction{true, c, i}; };
  const auto b = [](int c, std::size_t i) { return PipelineAction{false, c, i}; };
  EXPECT_EQ(order(0, 2, 2, 4), (Order{f(0, 0), f(0, 1), f(1, 0), f(1, 1), f(0, 2), b(1, 0), f(0, 3), b(1, 1), f(1, 2),
                                      b(0, 0), f(1, 3), b(0, 1), b(1, 2), b(1, 3), b(0, 2), b(0, 3)}));
  EXPECT_EQ(order(1, 2, 2, 4), (Order{f(0, 0), f(0, 1), f(1, 0), b(1, 0), f(1, 1), b(1, 1), f(0, 2), b(0, 0), f(0, 3),
                                      b(0, 1), f(1, 2), b(1, 2), f(1, 3), b(1, 3), b(0, 2), b(0, 3)}));
  // Without chunks, 1F1B: stage 0 of 2 runs one forward ahead.
  EXPECT_EQ(order(0, 2, 1, 3), (Order{f(0, 0), f(0, 1), b(0, 0), f(0, 2), b(0, 1), b(0, 2)}));
}

TEST(PipelineOrderTest, WarmupIsMegatronsAndBoundsTheActivationsKept) {
  for (int stages = 2; stages <= 8; ++stages)
    for (int chunks = 1; chunks <= 4; ++chunks)
      for (std::size_t groups = 1; groups <= 3; ++groups) {
        const std::size_t m = groups * static_cast<std::size_t>(stages), total = m * static_cast<std::size_t>(chunks);
        for (int s = 0; s < stages; ++s) {
          const std::size_t expected =
              std::min(total, chunks == 1 ? static_cast<std::size_t>(stages - s - 1)
                                          : static_cast<std::size_t>((stages - s - 1) * 2 + (chunks - 1) * stages));
          EXPECT_EQ(pipelineWarmup(s, stages, chunks, m), expected);
          std::size_t first_backward = 0, kept = 0, most = 0;
          const Order o = order(s, stages, chunks, m);
          while (o[first_backward].forward) ++first_backward;
          for (const PipelineAction& a : o) {
            if (!a.forward) {
              --kept;
              continue;
            }
            most = std::max(most, ++kept);
          }
          EXPECT_EQ(first_backward, std::min(total, expected + 1)) << stages << " x " << chunks << " stage " << s;
          EXPECT_EQ(most, std::min(total, expected + 1)) << "chunk activations kept at once";
        }
      }
}

// An epoch's short last step: the micro-batches past the whole groups run
// after them, their forwards first.
TEST(PipelineOrderTest, MicroBatchesPastTheWholeGroupsRunAfterThem) {
  const Order o = order(0, 2, 2, 5);
  ASSERT_EQ(o.size(), 20u);
  const Order tail(o.end() - 4, o.end());
  EXPECT_EQ(tail, (Order{{true, 0, 4}, {true, 1, 4}, {false, 1, 4}, {false, 0, 4}}));
  for (std::size_t i = 0; i + 4 < o.size(); ++i) EXPECT_LT(o[i].micro_batch, 4u);
}

}  // namespace
}  // namespace hpu::core
