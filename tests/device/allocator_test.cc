#include "hpu/device/allocator.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <ostream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "hpu/device/device.h"
#include "hpu/device/errors.h"

namespace hpu::device {

void PrintTo(const MemoryStats& s, std::ostream* os) {
  for (const auto& m : s.metrics()) *os << m.name << "=" << m.value << " ";
}

namespace {

// Limit, InUse, MaxInUse, NumAllocs, NumFrees, ActiveAllocs, MaxAllocSize,
// TotalSystemAllocs, TotalSystemFrees, TotalActiveAllocs.
MemoryStats expected(std::array<std::uint64_t, 10> v) {
  return {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9]};
}

DeviceOptions limitedTo(std::uint64_t bytes) {
  return {MemoryLimit{bytes, "HPU_EMULATOR_MEMORY_LIMIT=" + std::to_string(bytes) + " B", true}};
}

TEST(Allocator, AllTenStatsAfterAKnownSequence) {
  Device dev(0, 0, Generation::kGaudi2, limitedTo(1 << 20));
  Allocator& alloc = dev.allocator();
  {
    Buffer a = alloc.allocate(DType::kBFloat16, 1000);  // 2000 B logical, 4000 B host (class 4096)
    Buffer b = alloc.allocate(DType::kFloat32, 10);      // 40 B, class 64
    Buffer c = alloc.allocate(DType::kFloat8E4M3, 100);  // 100 B, 400 B host (class 448)
    EXPECT_EQ(alloc.stats(), expected({1 << 20, 2140, 2140, 3, 0, 3, 2000, 3, 0, 3}));

    a = Buffer();                                          // free 2000 B; its block is cached
    Buffer d = alloc.allocate(DType::kFloat32, 900);       // 3600 B host: same class, reuses a's block
    Buffer e = alloc.allocate(DType::kInt64, 3);           // 24 B, class 64: a new host block
    EXPECT_EQ(alloc.stats(), expected({1 << 20, 3764, 3764, 5, 1, 4, 3600, 4, 0, 4}));
    EXPECT_EQ(alloc.cachedBytes(), 0u);
  }
  // Everything freed, every block cached.
  EXPECT_EQ(alloc.stats(), expected({1 << 20, 0, 3764, 5, 5, 0, 3600, 4, 0, 4}));
  EXPECT_EQ(alloc.cachedBytes(), 4096u + 64u + 448u + 64u);

  alloc.resetPeakStats();
  alloc.emptyCache();
  EXPECT_EQ(alloc.stats(), expected({1 << 20, 0, 0, 5, 5, 0, 0, 4, 4, 0}));
  EXPECT_EQ(alloc.cachedBytes(), 0u);
}

TEST(Allocator, MetricsUseTheDeviceStatsMonitorNamesInOrder) {
  const MemoryStats s = expected({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  const std::vector<std::string> names{"Limit",        "InUse",          "MaxInUse",
                                       "NumAllocs",    "NumFrees",       "ActiveAllocs",
                                       "MaxAllocSize", "TotalSystemAllocs", "TotalSystemFrees",
                                       "TotalActiveAllocs"};
  const auto metrics = s.metrics();
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    EXPECT_EQ(metrics[i].name, names[i]);
    EXPECT_EQ(metrics[i].value, i + 1);
  }
}

TEST(Allocator, AllocateFreeLoopEndsWhereItStartedAndStopsCallingTheSystem) {
  Device dev(0, 0, Generation::kGaudi2, limitedTo(64 << 20));
  Allocator& alloc = dev.allocator();
  Buffer keep = alloc.allocate(DType::kFloat32, 123);
  const MemoryStats start = alloc.stats();
  std::uint64_t systemAllocsAfterWarmup = 0;
  for (int step = 0; step < 1000; ++step) {
    std::vector<Buffer> tensors;
    for (std::size_t n : {64u * 784u, 64u * 128u, 128u * 784u, 10u, 64u, 1u})
      tensors.push_back(alloc.allocate(step % 2 ? DType::kBFloat16 : DType::kFloat32, n));
    if (step == 1) systemAllocsAfterWarmup = alloc.stats().totalSystemAllocs;
  }
  const MemoryStats end = alloc.stats();
  EXPECT_EQ(end.inUse, start.inUse);
  EXPECT_EQ(end.activeAllocs, start.activeAllocs);
  EXPECT_EQ(end.numAllocs - start.numAllocs, 6000u);
  EXPECT_EQ(end.numFrees - start.numFrees, 6000u);
  EXPECT_EQ(end.totalSystemAllocs, systemAllocsAfterWarmup);  // steady state: cache only
  EXPECT_EQ(end.maxInUse, start.inUse + (64u * 784u + 64u * 128u + 128u * 784u + 10u + 64u + 1u) * 4u);
}

TEST(Allocator, OutOfMemoryNamesDeviceRequestUsageLimitAndRemedy) {
  Device dev(2, 5, Generation::kGaudi2, limitedTo(1000));
  Buffer held = dev.allocator().allocate(DType::kFloat32, 200);
  try {
    dev.allocator().allocate(DType::kBFloat16, 101);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_STREQ(e.what(),
                 "hpu:2: out of memory: cannot allocate 202 B with 800 B of 1000 B in use; lower "
                 "data.init_args.batch_size, use trainer.precision=bf16-mixed, or raise the limit set by "
                 "HPU_EMULATOR_MEMORY_LIMIT=1000 B");
    EXPECT_EQ(e.info().device, "hpu:2");
    EXPECT_EQ(e.info().requested, 202u);
    EXPECT_EQ(e.info().inUse, 800u);
    EXPECT_EQ(e.info().limit, 1000u);
  }
  // The failed request left no trace.
  EXPECT_EQ(dev.allocator().stats(), expected({1000, 800, 800, 1, 0, 1, 800, 1, 0, 1}));
  Buffer fits = dev.allocator().allocate(DType::kBFloat16, 100);  // exactly up to the limit
  EXPECT_EQ(dev.allocator().stats().inUse, 1000u);
}

TEST(Allocator, OutOfMemoryAtTheHbmCapacityPointsAtPrecisionAndBatchSize) {
  Device dev(0, 0, Generation::kGaudi, {MemoryLimit{32ull << 30, "gaudi's 32 GiB of HBM", false}});
  try {
    dev.allocator().allocate(DType::kFloat32, std::size_t{9} << 30);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_STREQ(e.what(),
                 "hpu:0: out of memory: cannot allocate 36 GiB with 0 B of 32 GiB in use; lower "
                 "data.init_args.batch_size or use trainer.precision=bf16-mixed (the limit is gaudi's 32 GiB "
                 "of HBM)");
  }
  EXPECT_THROW(dev.allocator().allocate(DType::kFloat32, std::numeric_limits<std::size_t>::max()),
               OutOfMemoryError);
  EXPECT_EQ(dev.allocator().stats().numAllocs, 0u);
}

TEST(Allocator, BuffersAreAlignedMoveOnlyAndKnowTheirDevice) {
  Device dev(1, 1, Generation::kGaudi3, limitedTo(1 << 20));
  Buffer a = dev.allocator().allocate(DType::kBFloat16, 17);
  EXPECT_TRUE(a.valid());
  EXPECT_EQ(&a.device(), &dev);
  EXPECT_EQ(a.dtype(), DType::kBFloat16);
  EXPECT_EQ(a.numel(), 17u);
  EXPECT_EQ(a.logicalBytes(), 34u);
  EXPECT_EQ(a.hostBytes(), 68u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data()) % 64, 0u);
  auto floats = a.as<float>();
  EXPECT_EQ(floats.size(), 17u);
  for (float& x : floats) x = 1.5f;  // the whole host extent is writable

  Buffer b = std::move(a);
  EXPECT_FALSE(a.valid());
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.as<float>()[16], 1.5f);
  EXPECT_EQ(dev.allocator().stats().activeAllocs, 1u);

  Buffer c = dev.allocator().allocate(DType::kInt64, 4);
  c = std::move(b);  // frees c's old block
  EXPECT_EQ(dev.allocator().stats().activeAllocs, 1u);
  EXPECT_EQ(dev.allocator().stats().numFrees, 1u);
  EXPECT_EQ(dev.allocator().stats().inUse, 34u);
}

TEST(Allocator, ZeroElementBuffersHaveNoStorageAndCountNothing) {
  Device dev(0, 0, Generation::kGaudi2, limitedTo(1 << 20));
  Buffer empty = dev.allocator().allocate(DType::kFloat32, 0);
  EXPECT_TRUE(empty.valid());
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.as<float>().size(), 0u);
  EXPECT_EQ(&empty.device(), &dev);
  EXPECT_EQ(dev.allocator().stats().numAllocs, 0u);
  empty = Buffer();
  EXPECT_EQ(dev.allocator().stats().numFrees, 0u);
}

TEST(Allocator, ViewingABufferAsAWrongSizedTypeIsABug) {
  Device dev(0, 0, Generation::kGaudi2, limitedTo(1 << 20));
  Buffer b = dev.allocator().allocate(DType::kBFloat16, 4);
  EXPECT_DEATH(b.as<std::uint16_t>(), "bfloat16 buffer viewed as a 2-byte type");
}

TEST(Allocator, DestroyingAnAllocatorWithLiveBuffersIsABug) {
  EXPECT_DEATH(
      {
        auto dev = std::make_unique<Device>(0, 0, Generation::kGaudi2, limitedTo(1 << 20));
        Buffer leaked = dev->allocator().allocate(DType::kFloat32, 8);
        dev.reset();
      },
      "hpu:0: allocator destroyed with 1 live buffers \\(32 bytes in use\\)");
}

TEST(Allocator, ConcurrentAllocationsKeepExactStats) {
  Device dev(0, 0, Generation::kGaudi2, limitedTo(256 << 20));
  constexpr int kThreads = 4;
  constexpr int kIterations = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&dev, t] {
      for (int i = 0; i < kIterations; ++i) {
        Buffer x = dev.allocator().allocate(DType::kFloat32, 100 + static_cast<std::size_t>((i * 7 + t) % 300));
        Buffer y = dev.allocator().allocate(DType::kBFloat16, 4096);
        x.as<float>()[0] = static_cast<float>(i);
      }
    });
  }
  for (auto& th : threads) th.join();
  const MemoryStats s = dev.allocator().stats();
  EXPECT_EQ(s.inUse, 0u);
  EXPECT_EQ(s.numAllocs, 2u * kThreads * kIterations);
  EXPECT_EQ(s.numFrees, s.numAllocs);
  EXPECT_EQ(s.activeAllocs, 0u);
  EXPECT_LE(s.maxInUse, static_cast<std::uint64_t>(kThreads) * (399 * 4 + 4096 * 2));
  EXPECT_EQ(s.totalActiveAllocs, s.totalSystemAllocs);
}

TEST(AllocatorSizeClasses, SmallStepsThenFourPerPowerOfTwo) {
  using detail::sizeClassFor;
  EXPECT_EQ(sizeClassFor(1).bytes, 64u);
  EXPECT_EQ(sizeClassFor(64).bytes, 64u);
  EXPECT_EQ(sizeClassFor(65).bytes, 128u);
  EXPECT_EQ(sizeClassFor(1024).index, 15u);
  EXPECT_EQ(sizeClassFor(1025).bytes, 1280u);
  EXPECT_EQ(sizeClassFor(1025).index, 16u);
  EXPECT_EQ(sizeClassFor(2048).bytes, 2048u);
  EXPECT_EQ(sizeClassFor(2049).bytes, 2560u);
  EXPECT_EQ(sizeClassFor(4000).bytes, 4096u);
  EXPECT_EQ(sizeClassFor((std::size_t{1} << 40) + 1).bytes, (std::size_t{1} << 40) + (std::size_t{1} << 38));
  std::uint32_t previous = 0;
  for (std::size_t bytes = 1; bytes < (std::size_t{1} << 34); bytes = bytes * 9 / 8 + 1) {
    const auto c = detail::sizeClassFor(bytes);
    EXPECT_GE(c.bytes, bytes);
    EXPECT_EQ(c.bytes % 64, 0u);
    EXPECT_LE(c.bytes, std::max(bytes + 63, bytes + bytes / 4));  // 64-byte steps, then at most 25%
    EXPECT_GE(c.index, previous);
    EXPECT_EQ(detail::sizeClassBytes(c.index), c.bytes);
    previous = c.index;
  }
}

}  // namespace
}  // namespace hpu::device
