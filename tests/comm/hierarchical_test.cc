// The hierarchical collectives (several ranks per node) against the flat
// ring, bit for bit, ranks as threads over the in-memory transport for
// layouts of 2..4 nodes x 2..4 ranks; both size variants of each (the
// threshold moved to force them), sizes 0, 1, 7 (fewer elements than ranks
// per block), 4097 and a large one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "hpu/comm/in_memory.h"
#include "rank_threads.h"
#include "recording_observer.h"
#include "reference.h"

namespace hpu::comm {
namespace {

using ::testing::HasSubstr;
using hpu::comm::test_support::RecordingObserver;
using hpu::comm::test_support::rethrowFirst;
using hpu::comm::test_support::runRanks;
using hpu::comm::test_support::smallChunks;
using hpu::comm::test_support::TypedBuffer;

constexpr std::size_t kSizes[] = {0, 1, 7, 4097, 131075};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax};
constexpr DType kReducible[] = {DType::kFloat32, DType::kBFloat16};
// Latency variant everywhere; bandwidth variant with rings between nodes;
// bandwidth variant with recursive doubling between nodes for small shards.
constexpr std::size_t kThresholds[] = {std::size_t{1} << 30, 0, 8192};

struct Layout {
  int nodes;
  int perNode;
  int world() const { return nodes * perNode; }
};

ProcessGroupOptions optionsWith(std::size_t threshold) {
  ProcessGroupOptions options = smallChunks();
  options.ringThresholdBytes = threshold;
  return options;
}

class HierarchicalTest : public ::testing::TestWithParam<Layout> {
 protected:
  int world() const { return GetParam().world(); }
  // Groups of the parameter's layout, and flat ones (a node per rank).
  std::vector<std::unique_ptr<ProcessGroup>> nodes(std::size_t threshold) const {
    return makeInMemoryProcessGroups(world(), optionsWith(threshold), GetParam().perNode);
  }
  std::vector<std::unique_ptr<ProcessGroup>> flat() const {
    return makeInMemoryProcessGroups(world(), optionsWith(64 * 1024), 1);
  }
};

// Every rank's buffer after `body` ran on each.
template <class Body>
std::vector<TypedBuffer> run(std::vector<std::unique_ptr<ProcessGroup>>& groups, DType dtype, std::size_t count,
                             Body body) {
  std::vector<TypedBuffer> buffers;
  for (std::size_t r = 0; r < groups.size(); ++r) buffers.emplace_back(dtype, count, static_cast<int>(r));
  rethrowFirst(runRanks(groups, [&](ProcessGroup& pg) { body(pg, buffers[static_cast<std::size_t>(pg.rank())]); }));
  return buffers;
}

TEST_P(HierarchicalTest, AllreduceIsBitIdenticalToTheFlatRing) {
  auto flatGroups = flat();
  for (std::size_t threshold : kThresholds) {
    auto groups = nodes(threshold);
    auto observer = std::make_shared<RecordingObserver>();
    groups[0]->setObserver(observer);
    for (DType dtype : kReducible) {
      for (ReduceOp op : kOps) {
        for (std::size_t count : kSizes) {
          SCOPED_TRACE(::testing::Message() << "threshold " << threshold << " dtype " << dtypeName(dtype) << " op "
                                            << reduceOpName(op) << " count " << count);
          const auto ring = run(flatGroups, dtype, count, [&](ProcessGroup& pg, TypedBuffer& b) {
            pg.allreduce(b.view(), AllreduceOptions{.op = op, .algorithm = Algorithm::kRing});
          });
          const auto mine = run(groups, dtype, count, [&](ProcessGroup& pg, TypedBuffer& b) {
            pg.allreduce(b.view(), AllreduceOptions{.op = op});
          });
          for (int r = 0; r < world(); ++r) {
            ASSERT_EQ(mine[static_cast<std::size_t>(r)].bytes(), ring[0].bytes()) << "rank " << r;
          }
        }
      }
    }
    for (const auto& description : observer->descriptions()) EXPECT_THAT(description, HasSubstr(", hierarchical)"));
  }
}

TEST_P(HierarchicalTest, AllreduceOfRandomFloatsIsBitIdenticalOnEveryRankAndCloseToDoubleSum) {
  for (std::size_t threshold : kThresholds) {
    auto groups = nodes(threshold);
    const std::size_t count = 4097;
    std::vector<std::vector<float>> data(static_cast<std::size_t>(world()), std::vector<float>(count));
    std::vector<double> expected(count, 0.0);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (auto& rankData : data) {
      for (std::size_t i = 0; i < count; ++i) expected[i] += rankData[i] = uniform(rng);
    }
    rethrowFirst(runRanks(groups, [&](ProcessGroup& pg) {
      pg.allreduce(std::span<float>(data[static_cast<std::size_t>(pg.rank())]), ReduceOp::kSum);
    }));
    for (std::size_t i = 0; i < count; ++i) ASSERT_NEAR(data[0][i], expected[i], 1e-5) << "element " << i;
    for (int r = 1; r < world(); ++r) {
      ASSERT_EQ(0, std::memcmp(data[static_cast<std::size_t>(r)].data(), data[0].data(), count * sizeof(float)));
    }
  }
}

TEST_P(HierarchicalTest, BroadcastCopiesTheRootsBufferFromEveryRoot) {
  for (std::size_t threshold : kThresholds) {
    auto groups = nodes(threshold);
    for (int root = 0; root < world(); ++root) {
      for (std::size_t count : kSizes) {
        SCOPED_TRACE(::testing::Message() << "threshold " << threshold << " root " << root << " count " << count);
        const auto out = run(groups, DType::kBFloat16, count,
                             [&](ProcessGroup& pg, TypedBuffer& b) { pg.broadcast(b.view(), root); });
        for (int r = 0; r < world(); ++r) {
          ASSERT_EQ(out[static_cast<std::size_t>(r)].bytes(), TypedBuffer(DType::kBFloat16, count, root).bytes());
        }
      }
    }
  }
}

TEST_P(HierarchicalTest, AllgatherIsBitIdenticalToTheFlatRing) {
  auto flatGroups = flat();
  auto groups = nodes(64 * 1024);
  for (std::size_t count : kSizes) {
    SCOPED_TRACE(::testing::Message() << "count " << count);
    auto gather = [&](ProcessGroup& pg, TypedBuffer& out) {
      const auto shard = ProcessGroup::shardRange(count, pg.size(), pg.rank());
      std::vector<float> input(shard.size);
      for (std::size_t j = 0; j < shard.size; ++j) input[j] = float(pg.rank() * 1000003 + int(shard.offset + j));
      pg.allgather(std::span<const float>(input), out.view());
    };
    const auto ring = run(flatGroups, DType::kFloat32, count, gather);
    const auto mine = run(groups, DType::kFloat32, count, gather);
    for (int r = 0; r < world(); ++r) {
      ASSERT_EQ(mine[static_cast<std::size_t>(r)].bytes(), ring[0].bytes()) << "rank " << r;
    }
  }
}

TEST_P(HierarchicalTest, ReduceScatterIsBitIdenticalToTheFlatRing) {
  auto flatGroups = flat();
  auto groups = nodes(64 * 1024);
  for (DType dtype : kReducible) {
    for (ReduceOp op : kOps) {
      for (std::size_t count : kSizes) {
        SCOPED_TRACE(::testing::Message() << "dtype " << dtypeName(dtype) << " op " << reduceOpName(op) << " count "
                                          << count);
        std::vector<std::vector<TypedBuffer>> outputs;
        for (auto* g : {&flatGroups, &groups}) {
          std::vector<TypedBuffer> out;
          for (int r = 0; r < world(); ++r) {
            out.emplace_back(dtype, ProcessGroup::shardRange(count, world(), r).size, 0);
          }
          run(*g, dtype, count, [&](ProcessGroup& pg, TypedBuffer& input) {
            pg.reduceScatter(input.view(), out[static_cast<std::size_t>(pg.rank())].view(), op);
          });
          outputs.push_back(std::move(out));
        }
        for (int r = 0; r < world(); ++r) {
          ASSERT_EQ(outputs[1][static_cast<std::size_t>(r)].bytes(), outputs[0][static_cast<std::size_t>(r)].bytes())
              << "rank " << r;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, HierarchicalTest,
                         ::testing::Values(Layout{2, 2}, Layout{2, 3}, Layout{3, 2}, Layout{2, 4}, Layout{4, 2},
                                           Layout{3, 3}),
                         [](const auto& info) {
                           return std::to_string(info.param.nodes) + "nodes_x" + std::to_string(info.param.perNode);
                         });

// The flat choice by size among 4 ranks: recursive doubling below 64 KiB,
// halving-doubling up to 512 KiB, the ring beyond.
TEST(HierarchicalChoice, OneNodeOrOneRankPerNodeStaysFlat) {
  for (int perNode : {1, 4}) {
    auto groups = makeInMemoryProcessGroups(4, optionsWith(64 * 1024), perNode);
    auto observer = std::make_shared<RecordingObserver>();
    groups[0]->setObserver(observer);
    rethrowFirst(runRanks(groups, [&](ProcessGroup& pg) {
      std::vector<float> small(10, 1.0f), middle(100000, 1.0f), large(200000, 1.0f);
      pg.allreduce(small, ReduceOp::kSum);
      pg.allreduce(middle, ReduceOp::kSum);
      pg.allreduce(large, ReduceOp::kSum);
    }));
    EXPECT_THAT(observer->descriptions(),
                ::testing::ElementsAre(HasSubstr("10 elements, recursive doubling)"),
                                       HasSubstr("100000 elements, halving-doubling)"),
                                       HasSubstr("200000 elements, ring)")));
  }
}

}  // namespace
}  // namespace hpu::comm
