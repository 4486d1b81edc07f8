// Every collective against a serial reference, ranks as threads over the
// in-memory transport, for world sizes 1..8 and sizes 0, 1, 7, 4097 and a
// large one; plus mismatches, aborts and timeouts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <thread>

#include <spdlog/fmt/fmt.h>

#include "hpu/comm/errors.h"
#include "hpu/comm/in_memory.h"
#include "hpu/comm/store.h"
#include "rank_threads.h"
#include "reference.h"

namespace hpu::comm {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using hpu::comm::test_support::exactInput;
using hpu::comm::test_support::expectAbortFailsTheOthers;
using hpu::comm::test_support::messageOf;
using hpu::comm::test_support::referenceValue;
using hpu::comm::test_support::rethrowFirst;
using hpu::comm::test_support::runRanks;
using hpu::comm::test_support::smallChunks;
using hpu::comm::test_support::TypedBuffer;

constexpr std::size_t kSizes[] = {0, 1, 7, 4097, 131075};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax};
constexpr DType kReducible[] = {DType::kFloat32, DType::kBFloat16};

class CollectivesTest : public ::testing::TestWithParam<int> {
 protected:
  int worldSize() const { return GetParam(); }
};

TEST_P(CollectivesTest, AllreduceMatchesSerialReferenceForEveryAlgorithmOpAndDtype) {
  auto groups = makeInMemoryProcessGroups(worldSize(), smallChunks());
  for (Algorithm algorithm : {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kHalvingDoubling}) {
    for (DType dtype : kReducible) {
      for (ReduceOp op : kOps) {
        for (std::size_t count : kSizes) {
          SCOPED_TRACE(::testing::Message() << "algorithm " << static_cast<int>(algorithm) << " dtype "
                                            << dtypeName(dtype) << " op " << reduceOpName(op) << " count " << count);
          std::vector<TypedBuffer> buffers;
          for (int r = 0; r < worldSize(); ++r) buffers.emplace_back(dtype, count, r);
          rethrowFirst(runRanks(groups, [&](ProcessGroup& pg) {
            pg.allreduce(buffers[static_cast<std::size_t>(pg.rank())].view(),
                         AllreduceOptions{.op = op, .algorithm = algorithm});
          }));
          for (std::size_t i = 0; i < count; ++i) {
            ASSERT_EQ(buffers[0].at(i), referenceValue(op, dtype, worldSize(), i)) << "element " << i;
          }
          for (int r = 1; r < worldSize(); ++r) ASSERT_EQ(buffers[static_cast<std::size_t>(r)].bytes(), buffers[0].bytes());
        }
      }
    }
  }
}

TEST_P(CollectivesTest, AllreduceOfRandomFloatsIsBitIdenticalOnEveryRankAndCloseToDoubleSum) {
  auto groups = makeInMemoryProcessGroups(worldSize(), smallChunks());
  for (Algorithm algorithm : {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kHalvingDoubling}) {
    const std::size_t count = 4097;
    std::vector<std::vector<float>> data(static_cast<std::size_t>(worldSize()), std::vector<float>(count));
    std::vector<double> expected(count, 0.0);
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (auto& rankData : data) {
      for (std::size_t i = 0; i < count; ++i) {
        rankData[i] = uniform(rng);
        expected[i] += rankData[i];
      }
    }
    rethrowFirst(runRanks(groups, [&](ProcessGroup& pg) {
      pg.allreduce(BufferView(std::span<float>(data[static_cast<std::size_t>(pg.rank())])),
                   AllreduceOptions{.op = ReduceOp::kSum, .algorithm = algorithm});
    }));
    for (std::size_t i = 0; i < count; ++i) ASSERT_NEAR(data[0][i], expected[i], 1e-5) << "element " << i;
    for (int r = 1; r < worldSize(); ++r) {
      ASSERT_EQ(0, std::memcmp(data[static_cast<std::size_t>(r)].data(), data[0].data(), count * sizeof(float)));
    }
  }
}

TEST_P(CollectivesTest, BroadcastCopiesTheRootsBufferFromEveryRoot) {
  for (std::size_t threshold : {std::size_t{1} << 30, std::size_t{0}}) {  // tree, then chain
    ProcessGroupOptions options = smallChunks();
    options.ringThresholdBytes = threshold;
    auto groups = makeInMemoryProcessGroups(worldSize(), options);
    for (int root = 0; root < worldSize(); ++root) {
      for (DType dtype : kReducible) {
        for (std::size_t count : kSizes) {
          SCOPED_TRACE(::testing::Message() << "root " << root << " dtype " << dtypeName(dtype) << " count " << count);
          std::vector<TypedBuffer> buffers;
          for (int r = 0; r < worldSize(); ++r) buffers.emplace_back(dtype, count, r);
          rethrowFirst(runRanks(groups, [&](ProcessGroup& pg) {
            pg.broadcast(buffers[static_cast<std::size_t>(pg.rank())].view(), root);
          }));
          for (int r = 0; r < worldSize(); ++r) {
            ASSERT_EQ(buffers[static_cast<std::size_t>(r)].bytes(), TypedBuffer(dtype, count, root).bytes());
          }
        }
      }
    }
  }
}

TEST_P(CollectivesTest, BroadcastOfBytes) {
  auto groups = makeInMemoryProcessGroups(worldSize(), smallChunks());
  std::vector<std::vector<std::byte>> buffers(static_cast<std::size_t>(worldSize()), std::vector<std::byte>(1001));
  for (std::size_t i = 0; i < 1001; ++i) buffers[0][i] = static_cast<std::byte>(i * 13);
  rethrowFirst(runRanks(groups, [&](ProcessGroup& pg) {
    pg.broadcast(BufferView(std::span<std::byte>(buffers[static_cast<std::size_t>(pg.rank())])), 0);
  }));
  for (const auto& b : buffers) EXPECT_EQ(b, buffers[0]);
}

TEST_P(CollectivesTest, AllgatherConcatenatesEveryRanksShard) {
  auto groups = makeInMemoryProcessGroups(worldSize(), smallChunks());
  for (std::size_t count : kSizes) {
    SCOPED_TRACE(::testing::Message() << "count " << count);
    std::vector<std::vector<float>> inputs;
    std::vector<std::vector<float>> outputs(static_cast<std::size_t>(worldSize()), std::vector<float>(count, -99.0f));
    for (int r = 0; r < worldSize(); ++r) {
      const auto shard = ProcessGroup::shardRange(count, worldSize(), r);
      std::vector<float> input(shard.size);
      for (std::size_t j = 0; j < shard.size; ++j) input[j] = exactInput(r, shard.offset + j);
      inputs.push_back(std::move(input));
    }
    rethrowFirst(runRanks(groups, [&](ProcessGroup& pg) {
      const auto r = static_cast<std::size_t>(pg.rank());
      pg.allgather(std::span<const float>(inputs[r]), std::span<float>(outputs[r]));
    }));
    for (int r = 0; r < worldSize(); ++r) {
      for (std::size_t i = 0; i < count; ++i) {
        int owner = 0;
        while (ProcessGroup::shardRange(count, worldSize(), owner).offset +
                   ProcessGroup::shardRange(count, worldSize(), owner).size <= i) {
          ++owner;
        }
        ASSERT_EQ(outputs[static_cast<std::size_t>(r)][i], exactInput(owner, i)) << "rank " << r << " element " << i;
      }
    }
  }
}

TEST_P(CollectivesTest, ReduceScatterLeavesEachRankItsReducedShard) {
  auto groups = makeInMemoryProcessGroups(worldSize(), smallChunks());
  for (DType dtype : kReducible) {
    for (ReduceOp op : kOps) {
      for (std::size_t count : kSizes) {
        SCOPED_TRACE(::testing::Message() << "dtype " << dtypeName(dtype) << " op " << reduceOpName(op) << " count "
                                          << count);
        std::vector<TypedBuffer> inputs;
        std::vector<TypedBuffer> outputs;
        for (int r = 0; r < worldSize(); ++r) {
          inputs.emplace_back(dtype, count, r);
          outputs.emplace_back(dtype, ProcessGroup::shardRange(count, worldSize(), r).size, r);
        }
        rethrowFirst(runRanks(groups, [&](ProcessGroup& pg) {
          const auto r = static_cast<std::size_t>(pg.rank());
          pg.reduceScatter(inputs[r].view(), outputs[r].view(), op);
        }));
        for (int r = 0; r < worldSize(); ++r) {
          const auto shard = ProcessGroup::shardRange(count, worldSize(), r);
          for (std::size_t j = 0; j < shard.size; ++j) {
            ASSERT_EQ(outputs[static_cast<std::size_t>(r)].at(j), referenceValue(op, dtype, worldSize(), shard.offset + j))
                << "rank " << r << " element " << j;
          }
        }
      }
    }
  }
}

TEST_P(CollectivesTest, AsyncAllreducesRunInOrderAndInterleaveWithSynchronousCalls) {
  auto groups = makeInMemoryProcessGroups(worldSize(), smallChunks());
  constexpr int kBuckets = 5;
  std::vector<std::vector<std::vector<float>>> buckets(static_cast<std::size_t>(worldSize()));
  for (int r = 0; r < worldSize(); ++r) {
    for (int b = 0; b < kBuckets; ++b) buckets[static_cast<std::size_t>(r)].emplace_back(100 + 50 * b, float(r + b));
  }
  rethrowFirst(runRanks(groups, [&](ProcessGroup& pg) {
    auto& mine = buckets[static_cast<std::size_t>(pg.rank())];
    std::vector<Work> works;
    for (auto& bucket : mine) works.push_back(pg.allreduceAsync(bucket, ReduceOp::kSum));
    pg.barrier("after_buckets");
    for (auto& w : works) w.wait(30s);
    for (auto& w : works) EXPECT_TRUE(w.completed());
  }));
  const int n = worldSize();
  for (int r = 0; r < n; ++r) {
    for (int b = 0; b < kBuckets; ++b) {
      const float expected = float(n * (n - 1) / 2 + n * b);
      for (float v : buckets[static_cast<std::size_t>(r)][static_cast<std::size_t>(b)]) ASSERT_EQ(v, expected);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CollectivesTest, ::testing::Range(1, 9),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

TEST(CollectiveFailures, MismatchedCountsFailWithBothSidesNamed) {
  auto groups = makeInMemoryProcessGroups(2, smallChunks());
  auto errors = runRanks(groups, [&](ProcessGroup& pg) {
    std::vector<float> data(pg.rank() == 0 ? 10 : 12, 1.0f);
    pg.allreduce(data, ReduceOp::kSum);
  });
  EXPECT_THAT(messageOf<CollectiveMismatchError>(errors[0]),
              HasSubstr("rank 0: allreduce #0 (sum, float32, 10 elements, recursive doubling) does not match rank "
                        "1's allreduce #0 (sum, float32, 12 elements, recursive doubling)"));
  EXPECT_THAT(messageOf<CollectiveMismatchError>(errors[1]),
              HasSubstr("rank 1: allreduce #0 (sum, float32, 12 elements, recursive doubling) does not match rank "
                        "0's allreduce #0 (sum, float32, 10 elements, recursive doubling)"));
}

TEST(CollectiveFailures, MismatchedOpsAndKindsAreNamed) {
  auto groups = makeInMemoryProcessGroups(2, smallChunks());
  auto errors = runRanks(groups, [&](ProcessGroup& pg) {
    std::vector<float> data(8, 1.0f);
    if (pg.rank() == 0) {
      pg.allreduce(data, ReduceOp::kMax);
    } else {
      pg.broadcast(std::span<float>(data), 1);
    }
  });
  EXPECT_THAT(messageOf<CollectiveMismatchError>(errors[0]),
              HasSubstr("rank 0: allreduce #0 (max, float32, 8 elements, recursive doubling) does not match rank "
                        "1's broadcast #0 (root 1, float32, 8 elements)"));
}

TEST(CollectiveFailures, AbortingRankFailsTheOthersWithPeerLostErrorNamingIt) {
  auto groups = makeInMemoryProcessGroups(4, smallChunks());
  std::vector<std::vector<float>> data(4, std::vector<float>(1000, 1.0f));
  expectAbortFailsTheOthers(
      groups, 2, "out of device memory",
      [&](ProcessGroup& pg) { pg.allreduce(data[static_cast<std::size_t>(pg.rank())], ReduceOp::kSum); },
      [](int r) { return fmt::format("rank {}: allreduce #[01] \\(sum, float32, 1000", r); });
}

TEST(CollectiveFailures, FailureOnTheCommThreadIsRethrownByWaitAndPoisonsTheGroup) {
  auto groups = makeInMemoryProcessGroups(2, smallChunks());
  auto errors = runRanks(groups, [&](ProcessGroup& pg) {
    if (pg.rank() == 1) {
      pg.abort("stopping");
      return;
    }
    std::vector<float> data(10, 1.0f);
    Work work = pg.allreduceAsync(data, ReduceOp::kSum);
    EXPECT_THROW(work.wait(30s), PeerLostError);
    EXPECT_THROW(pg.barrier("after"), PeerLostError);
  });
  EXPECT_FALSE(errors[0]);
}

TEST(CollectiveFailures, RankThatSkipsACollectiveMakesTheOthersTimeOut) {
  auto groups = makeInMemoryProcessGroups(2, smallChunks());
  auto errors = runRanks(groups, [&](ProcessGroup& pg) {
    if (pg.rank() == 1) return;
    std::vector<float> data(10, 1.0f);
    pg.allreduce(BufferView(std::span<float>(data)), AllreduceOptions{.timeout = 200ms});
  });
  EXPECT_THAT(messageOf<CommTimeoutError>(errors[0]),
              HasSubstr("rank 0: allreduce #0 (sum, float32, 10 elements, recursive doubling) timed out after 200ms "
                        "waiting for rank 1"));
}

TEST(CollectiveFailures, BarrierTimeoutOnRankZeroNamesEveryMissingRank) {
  auto groups = makeInMemoryProcessGroups(5, smallChunks());
  auto errors = runRanks(groups, [&](ProcessGroup& pg) {
    if (pg.rank() == 2 || pg.rank() == 4) return;
    pg.barrier("end_of_epoch", CollectiveOptions{.timeout = 300ms});
  });
  EXPECT_THAT(messageOf<CommTimeoutError>(errors[0]),
              HasSubstr("rank 0: barrier #0 'end_of_epoch' timed out after 300ms; missing ranks: 2,4"));
  EXPECT_THAT(messageOf<PeerLostError>(errors[1]), HasSubstr("missing ranks: 2,4"));
}

TEST(CollectiveFailures, BarrierNamesMustMatch) {
  auto groups = makeInMemoryProcessGroups(2, smallChunks());
  auto errors = runRanks(groups, [&](ProcessGroup& pg) { pg.barrier(pg.rank() == 0 ? "fit_end" : "epoch_end"); });
  EXPECT_THAT(messageOf<CollectiveMismatchError>(errors[0]),
              HasSubstr("rank 0: barrier #0 'fit_end' does not match rank 1's barrier #0 'epoch_end'"));
}

TEST(CollectiveFailures, SequenceNumbersExposeAnExtraCollective) {
  auto groups = makeInMemoryProcessGroups(2, smallChunks());
  auto errors = runRanks(groups, [&](ProcessGroup& pg) {
    std::vector<float> data(4, 1.0f);
    if (pg.rank() == 1) pg.barrier("only_rank_one");
    pg.allreduce(data, ReduceOp::kSum);
  });
  EXPECT_THAT(messageOf<CommError>(errors[0]), HasSubstr("does not match rank 1's barrier #0 'only_rank_one'"));
}

TEST(Numerics, Bf16SumsRoundToNearestEvenInEveryStep) {
  using test_support::floatToBf16;
  using test_support::bf16ToFloat;
  auto groups = makeInMemoryProcessGroups(2);
  // 1 + 2^-8 is halfway between bf16 1.0 (even) and 1.0078125 (odd): rounds down.
  // 1.0078125 + 2^-8 is halfway between 1.0078125 (odd) and 1.015625 (even): rounds up.
  std::vector<std::vector<std::uint16_t>> data{
      {floatToBf16(1.0f), floatToBf16(1.0078125f), floatToBf16(-3.0f)},
      {floatToBf16(0.00390625f), floatToBf16(0.00390625f), floatToBf16(std::numeric_limits<float>::quiet_NaN())}};
  rethrowFirst(runRanks(groups, [&](ProcessGroup& pg) {
    pg.allreduce(BufferView::bfloat16(data[static_cast<std::size_t>(pg.rank())]), AllreduceOptions{.op = ReduceOp::kSum});
  }));
  for (const auto& rank : data) {
    EXPECT_EQ(bf16ToFloat(rank[0]), 1.0f);
    EXPECT_EQ(bf16ToFloat(rank[1]), 1.015625f);
    EXPECT_TRUE(std::isnan(bf16ToFloat(rank[2])));
  }
}

// The reduction kernels round by the project's one bfloat16 rule
// (hpu/numerics/bfloat16.h), as device numerics do: ties to even, overflow to
// Inf, every NaN to 0xFFFF whatever its sign and payload.
TEST(Numerics, Bf16ReductionsRoundToTheBitsDeviceNumericsGive) {
  auto groups = makeInMemoryProcessGroups(2);
  // Per lane: rank 0's bits, rank 1's bits, the sum's bits.
  const std::vector<std::array<std::uint16_t, 3>> lanes{
      {0x3F80, 0x3B80, 0x3F80},  // 1 + 2^-8: a tie, to 1.0 (even)
      {0x3F81, 0x3B80, 0x3F82},  // 1.0078125 + 2^-8: a tie, to 1.015625 (even)
      {0x7F7F, 0x7F7F, 0x7F80},  // twice the largest finite: +Inf
      {0xFF7F, 0xFF7F, 0xFF80},  // and negative: -Inf
      {0x7FC1, 0x3F80, 0xFFFF},  // a NaN with a payload
      {0xFFC0, 0x3F80, 0xFFFF},  // a negative NaN
      {0x7F80, 0xFF80, 0xFFFF},  // Inf - Inf
  };
  std::vector<std::vector<std::uint16_t>> data(2);
  for (const auto& lane : lanes)
    for (std::size_t r = 0; r < 2; ++r) data[r].push_back(lane[r]);
  rethrowFirst(runRanks(groups, [&](ProcessGroup& pg) {
    pg.allreduce(BufferView::bfloat16(data[static_cast<std::size_t>(pg.rank())]),
                 AllreduceOptions{.op = ReduceOp::kSum});
  }));
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t i = 0; i < lanes.size(); ++i)
      EXPECT_EQ(data[r][i], lanes[i][2]) << std::hex << "rank " << r << ", lane " << i << ": 0x" << data[r][i];
}

TEST(Numerics, MinAndMaxPropagateNaN) {
  auto groups = makeInMemoryProcessGroups(3);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::vector<float>> mins{{1.0f, nan}, {nan, 2.0f}, {0.5f, 3.0f}};
  std::vector<std::vector<float>> maxs = mins;
  rethrowFirst(runRanks(groups, [&](ProcessGroup& pg) {
    pg.allreduce(mins[static_cast<std::size_t>(pg.rank())], ReduceOp::kMin);
    pg.allreduce(maxs[static_cast<std::size_t>(pg.rank())], ReduceOp::kMax);
  }));
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(std::isnan(mins[static_cast<std::size_t>(r)][0]));
    EXPECT_TRUE(std::isnan(mins[static_cast<std::size_t>(r)][1]));
    EXPECT_TRUE(std::isnan(maxs[static_cast<std::size_t>(r)][0]));
  }
}

TEST(InMemoryStore, SetGetAddWaitAndTimeouts) {
  auto store = makeInMemoryStore();
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);
    store->set("ready", "yes", deadline);
  });
  EXPECT_EQ(store->get("ready", deadline), "yes");
  setter.join();
  EXPECT_EQ(store->add("n", 5, deadline), 5);
  EXPECT_EQ(store->add("n", -2, deadline), 3);
  const std::vector<std::string> keys{"ready", "n"};
  store->wait(keys, deadline);
  EXPECT_THROW(store->get("absent", std::chrono::steady_clock::now() + 50ms), CommTimeoutError);
  store->set("text", "abc", deadline);
  EXPECT_THROW(store->add("text", 1, deadline), CommError);
  EXPECT_THROW(store->set("", "x", deadline), CommError);
}

TEST(SingleRank, CollectivesAreLocalAndAvgIsIdentity) {
  auto groups = makeInMemoryProcessGroups(1);
  std::vector<float> data{1.5f, -2.0f, 3.25f};
  groups[0]->allreduce(data, ReduceOp::kAvg);
  EXPECT_EQ(data, (std::vector<float>{1.5f, -2.0f, 3.25f}));
  std::vector<float> gathered(3);
  groups[0]->allgather(std::span<const float>(data), std::span<float>(gathered));
  EXPECT_EQ(gathered, data);
  groups[0]->barrier("solo");
  groups[0]->allreduceAsync(data, ReduceOp::kMax).wait(30s);
  EXPECT_EQ(data, (std::vector<float>{1.5f, -2.0f, 3.25f}));
}

}  // namespace
}  // namespace hpu::comm
