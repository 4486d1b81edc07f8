// Per-device memory: the allocator every device tensor's storage comes from.
//
// Two layers, each with its own DeviceStatsMonitor counters:
//  - Tensor level. allocate() asks for numel elements of a dtype; the device
//    accounts numel * logicalSize(dtype) bytes (a bfloat16 tensor of N
//    elements uses 2N bytes), refuses requests that would take InUse past
//    Limit (OutOfMemoryError), and counts NumAllocs, NumFrees, ActiveAllocs,
//    InUse, MaxInUse and MaxAllocSize. Zero-element requests return a Buffer
//    without storage and count nothing.
//  - Host level. The blocks behind the buffers are host memory in size
//    classes (multiples of 64 bytes up to 1 KiB, then four classes per power
//    of two), cached in per-class free lists when a buffer dies, as a caching
//    device allocator does: per-step tensor churn is a mutex and a list pop,
//    no system call. TotalSystemAllocs / TotalSystemFrees count the real host
//    allocations and frees; TotalActiveAllocs = held host blocks (live +
//    cached). emptyCache() returns cached blocks to the system. The cache is
//    emulator host memory and does not count against Limit.
//  - On a shape-only device (DeviceOptions::shapeOnly) buffers have no host
//    storage (data() is null): the tensor-level counters move exactly as on
//    a real device, the host-level ones stay at zero.
//
// Thread-safe: every member may be called concurrently.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "hpu/device/buffer.h"
#include "hpu/device/dtype.h"

namespace hpu::device {

class Device;

// A snapshot of the DeviceStatsMonitor metrics of one device, in bytes or
// counts. MaxInUse and MaxAllocSize are the peaks since the last
// resetPeakStats() (or since creation).
struct MemoryStats {
  std::uint64_t limit = 0;              // Limit: memory the device may use
  std::uint64_t inUse = 0;              // InUse: bytes of live tensors
  std::uint64_t maxInUse = 0;           // MaxInUse: peak of InUse
  std::uint64_t numAllocs = 0;          // NumAllocs: tensor allocations so far
  std::uint64_t numFrees = 0;           // NumFrees: tensor frees so far
  std::uint64_t activeAllocs = 0;       // ActiveAllocs: live tensors
  std::uint64_t maxAllocSize = 0;       // MaxAllocSize: largest single allocation
  std::uint64_t totalSystemAllocs = 0;  // TotalSystemAllocs: host allocations so far
  std::uint64_t totalSystemFrees = 0;   // TotalSystemFrees: host frees so far
  std::uint64_t totalActiveAllocs = 0;  // TotalActiveAllocs: host blocks held

  struct Metric {
    std::string_view name;
    std::uint64_t value;
  };
  // The ten metrics under the names DeviceStatsMonitor logs, in the seeds' order.
  std::array<Metric, 10> metrics() const;
  bool operator==(const MemoryStats&) const = default;
};

// How a device's memory limit was set, for the out-of-memory message.
struct MemoryLimit {
  std::uint64_t bytes;
  std::string source;       // "gaudi2's 96 GiB of HBM" or "HPU_EMULATOR_MEMORY_LIMIT=256 MiB"
  bool overridden = false;  // set by HPU_EMULATOR_MEMORY_LIMIT
};

class Allocator {
 public:
  Allocator(Device& device, MemoryLimit limit);
  // REQUIRES: no live Buffer from this allocator.
  ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // Uninitialised storage for numel elements of dtype. Throws
  // OutOfMemoryError past the limit, DeviceError if the host cannot provide
  // the memory even after emptying the cache.
  Buffer allocate(DType dtype, std::size_t numel);

  MemoryStats stats() const;
  // MaxInUse := InUse, MaxAllocSize := 0.
  void resetPeakStats();
  // Returns every cached host block to the system.
  void emptyCache();
  // Host bytes held in the free lists.
  std::uint64_t cachedBytes() const;
  std::uint64_t limit() const { return limit_.bytes; }
  Device& device() const { return device_; }

 private:
  friend class Buffer;
  struct FreeBlock {
    FreeBlock* next;
  };
  static constexpr std::size_t kNumSizeClasses = 256;

  void release(void* block, std::uint32_t sizeClass, std::uint64_t logicalBytes) noexcept;
  void* takeBlock(std::uint32_t sizeClass, std::size_t classBytes);  // REQUIRES: mu_ held
  void emptyCacheLocked();                                            // REQUIRES: mu_ held

  Device& device_;
  const MemoryLimit limit_;
  mutable std::mutex mu_;
  MemoryStats stats_;
  std::uint64_t cachedBytes_ = 0;
  std::array<FreeBlock*, kNumSizeClasses> free_{};
};

namespace detail {
// The host size class of a request of `bytes` (> 0): its index and block size.
struct SizeClass {
  std::uint32_t index;
  std::size_t bytes;
};
SizeClass sizeClassFor(std::size_t bytes);
// The block size of a size class index.
std::size_t sizeClassBytes(std::uint32_t index);
}  // namespace detail

}  // namespace hpu::device
