#include "hpu/device/allocator.h"

#include <fmt/core.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <string>

#include "hpu/device/byte_size.h"
#include "hpu/device/device.h"
#include "hpu/device/errors.h"

namespace hpu::device {

namespace detail {

SizeClass sizeClassFor(std::size_t bytes) {
  HPU_CHECK(bytes > 0);
  constexpr std::size_t kSmallLimit = 1024;  // 64-byte steps up to here: classes 0..15
  if (bytes <= kSmallLimit) {
    const auto index = static_cast<std::uint32_t>((bytes + 63) / 64 - 1);
    return {index, (index + 1) * std::size_t{64}};
  }
  // 2^k < bytes <= 2^(k+1), k >= 10: classes 2^k * {1.25, 1.5, 1.75, 2}.
  const int k = std::bit_width(bytes - 1) - 1;
  HPU_CHECK(k < 63, "request of {} bytes has no size class", bytes);
  const std::size_t base = std::size_t{1} << k;
  const std::size_t step = base / 4;
  const std::size_t sub = (bytes - base + step - 1) / step;  // 1..4
  const auto index = static_cast<std::uint32_t>(16 + (k - 10) * 4 + (sub - 1));
  return {index, base + sub * step};
}

std::size_t sizeClassBytes(std::uint32_t index) {
  if (index < 16) return (index + 1) * std::size_t{64};
  const std::size_t base = std::size_t{1} << (10 + (index - 16) / 4);
  return base + ((index - 16) % 4 + 1) * (base / 4);
}

}  // namespace detail

std::array<MemoryStats::Metric, 10> MemoryStats::metrics() const {
  return {{
      {"Limit", limit},
      {"InUse", inUse},
      {"MaxInUse", maxInUse},
      {"NumAllocs", numAllocs},
      {"NumFrees", numFrees},
      {"ActiveAllocs", activeAllocs},
      {"MaxAllocSize", maxAllocSize},
      {"TotalSystemAllocs", totalSystemAllocs},
      {"TotalSystemFrees", totalSystemFrees},
      {"TotalActiveAllocs", totalActiveAllocs},
  }};
}

Allocator::Allocator(Device& device, MemoryLimit limit) : device_(device), limit_(std::move(limit)) {
  stats_.limit = limit_.bytes;
}

namespace {

// Blocks from this size up are checked against the host's available memory,
// which is kept this far from exhausted.
constexpr std::size_t kCheckedBlockBytes = std::size_t{1} << 20;
constexpr std::size_t kHostReserveBytes = std::size_t{256} << 20;

// MemAvailable of /proc/meminfo in bytes (none where it cannot be read).
std::optional<std::uint64_t> hostMemoryAvailable() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("MemAvailable:", 0) == 0) return std::stoull(line.substr(13)) * 1024;  // "MemAvailable: N kB"
  return std::nullopt;
}

}  // namespace

Allocator::~Allocator() {
  std::lock_guard lock(mu_);
  HPU_CHECK(stats_.activeAllocs == 0, "{}: allocator destroyed with {} live buffers ({} bytes in use)",
            device_.name(), stats_.activeAllocs, stats_.inUse);
  emptyCacheLocked();
}

Buffer Allocator::allocate(DType dtype, std::size_t numel) {
  if (numel == 0) return Buffer(this, nullptr, dtype, 0, 0);
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t logical =
      numel > kMax / logicalSize(dtype) ? kMax : static_cast<std::uint64_t>(numel) * logicalSize(dtype);

  std::lock_guard lock(mu_);
  if (logical > limit_.bytes - stats_.inUse)
    throw OutOfMemoryError(
        {device_.name(), logical, stats_.inUse, limit_.bytes, limit_.source, limit_.overridden});
  void* block = nullptr;
  std::uint32_t sizeClassIndex = 0;
  if (!device_.shapeOnly()) {
    // Within the limit the host size cannot overflow: physicalSize <= 4 * logicalSize.
    const detail::SizeClass sizeClass = detail::sizeClassFor(numel * physicalSize(dtype));
    block = takeBlock(sizeClass.index, sizeClass.bytes);
    sizeClassIndex = sizeClass.index;
  }
  stats_.inUse += logical;
  stats_.maxInUse = std::max(stats_.maxInUse, stats_.inUse);
  stats_.maxAllocSize = std::max(stats_.maxAllocSize, logical);
  ++stats_.numAllocs;
  ++stats_.activeAllocs;
  return Buffer(this, block, dtype, numel, sizeClassIndex);
}

void* Allocator::takeBlock(std::uint32_t sizeClass, std::size_t classBytes) {
  if (FreeBlock* head = free_[sizeClass]) {
    free_[sizeClass] = head->next;
    cachedBytes_ -= classBytes;
    return head;
  }
  const auto hostFull = [&] {
    return DeviceError(fmt::format(
        "{}: the host has no {} left to emulate device memory ({} in use on the device). To see whether the run "
        "fits a Gaudi, and how fast it trains, without allocating: hpu-train estimate with the same arguments. "
        "To run here: lower data.init_args.batch_size or the model's size",
        device_.name(), formatByteSize(classBytes), formatByteSize(stats_.inUse)));
  };
  // Large blocks are checked against the memory the host has left: past it
  // the kernel would kill the process, not fail the allocation.
  if (classBytes >= kCheckedBlockBytes)
    if (const auto available = hostMemoryAvailable(); available && classBytes + kHostReserveBytes > *available) {
      emptyCacheLocked();
      if (const auto again = hostMemoryAvailable(); again && classBytes + kHostReserveBytes > *again) throw hostFull();
    }
  void* block = std::aligned_alloc(64, classBytes);
  if (block == nullptr) {
    emptyCacheLocked();
    block = std::aligned_alloc(64, classBytes);
    if (block == nullptr) throw hostFull();
  }
  ++stats_.totalSystemAllocs;
  ++stats_.totalActiveAllocs;
  return block;
}

void Allocator::release(void* block, std::uint32_t sizeClass, std::uint64_t logicalBytes) noexcept {
  std::lock_guard lock(mu_);
  stats_.inUse -= logicalBytes;
  ++stats_.numFrees;
  --stats_.activeAllocs;
  if (block == nullptr) return;  // a shape-only buffer
  auto* freed = static_cast<FreeBlock*>(block);
  freed->next = free_[sizeClass];
  free_[sizeClass] = freed;
  cachedBytes_ += detail::sizeClassBytes(sizeClass);
}

MemoryStats Allocator::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Allocator::resetPeakStats() {
  std::lock_guard lock(mu_);
  stats_.maxInUse = stats_.inUse;
  stats_.maxAllocSize = 0;
}

void Allocator::emptyCache() {
  std::lock_guard lock(mu_);
  emptyCacheLocked();
}

void Allocator::emptyCacheLocked() {
  for (FreeBlock*& head : free_) {
    while (head != nullptr) {
      FreeBlock* next = head->next;
      std::free(head);
      head = next;
      ++stats_.totalSystemFrees;
      --stats_.totalActiveAllocs;
    }
  }
  cachedBytes_ = 0;
}

std::uint64_t Allocator::cachedBytes() const {
  std::lock_guard lock(mu_);
  return cachedBytes_;
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = std::exchange(other.owner_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    numel_ = std::exchange(other.numel_, 0);
    dtype_ = other.dtype_;
    sizeClass_ = other.sizeClass_;
  }
  return *this;
}

Device& Buffer::device() const {
  HPU_CHECK(owner_ != nullptr, "device() of an empty Buffer");
  return owner_->device();
}

void Buffer::release() noexcept {
  if (owner_ != nullptr && numel_ > 0) owner_->release(data_, sizeClass_, logicalBytes());
  owner_ = nullptr;
  data_ = nullptr;
  numel_ = 0;
}

}  // namespace hpu::device
