#include "shm_lane.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "hpu/comm/errors.h"

namespace hpu::comm::detail {
namespace {

constexpr std::uint32_t kFree = 0;
constexpr std::uint32_t kFull = 1;

// State words, one cache line each, then page-aligned slots.
constexpr std::size_t kStateStride = 64;
constexpr std::size_t kSlotsOffset = 4096 * 2;
static_assert(ShmSegment::kSlots * kStateStride <= kSlotsOffset);
static_assert(ShmSegment::kSlotBytes % 4096 == 0);

constexpr std::size_t kNoticeFixedBytes = sizeof(std::uint32_t) + sizeof(std::uint64_t);

std::string laneName(int rank, int peer) {
  std::array<unsigned char, 8> nonce{};
  randombytes_buf(nonce.data(), nonce.size());
  char hex[17] = {};
  sodium_bin2hex(hex, sizeof hex, nonce.data(), nonce.size());
  return fmt::format("/hpu-train-{}-{}-r{}-to-r{}", ::getpid(), hex, rank, peer);
}

}  // namespace

ShmSegment::~ShmSegment() { ::munmap(base_, bytes_); }

std::size_t ShmSegment::segmentBytes() { return kSlotsOffset + kSlots * kSlotBytes; }

std::atomic<std::uint32_t>& ShmSegment::state(std::uint32_t index) {
  return *reinterpret_cast<std::atomic<std::uint32_t>*>(static_cast<std::byte*>(base_) + index * kStateStride);
}

std::byte* ShmSegment::slot(std::uint32_t index) {
  return static_cast<std::byte*>(base_) + kSlotsOffset + index * kSlotBytes;
}

void ShmSegment::release(std::uint32_t index) { state(index).store(kFree, std::memory_order_release); }

std::string encodeNotice(const ShmNotice& notice) {
  std::string out(kNoticeFixedBytes, '\0');
  std::memcpy(out.data(), &notice.slot, sizeof notice.slot);
  std::memcpy(out.data() + sizeof notice.slot, &notice.bytes, sizeof notice.bytes);
  return out + notice.segment;
}

std::optional<ShmNotice> decodeNotice(std::span<const std::byte> bytes) {
  if (bytes.size() <= kNoticeFixedBytes) return std::nullopt;
  ShmNotice notice;
  std::memcpy(&notice.slot, bytes.data(), sizeof notice.slot);
  std::memcpy(&notice.bytes, bytes.data() + sizeof notice.slot, sizeof notice.bytes);
  notice.segment.assign(reinterpret_cast<const char*>(bytes.data()) + kNoticeFixedBytes, bytes.size() - kNoticeFixedBytes);
  if (notice.slot >= ShmSegment::kSlots || notice.bytes > ShmSegment::kSlotBytes) return std::nullopt;
  return notice;
}

std::unique_ptr<ShmSender> ShmSender::create(int rank, int peer) {
  const std::string name = laneName(rank, peer);
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    spdlog::debug("rank {}: no shared-memory lane to rank {} ({}: {}); using its socket", rank, peer, name,
                  std::strerror(errno));
    return nullptr;
  }
  const std::size_t bytes = ShmSegment::segmentBytes();
  const int reserved = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  void* base = reserved == 0 ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  const int error = reserved != 0 ? reserved : errno;
  ::close(fd);
  if (base == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    spdlog::debug("rank {}: no shared-memory lane to rank {} ({} bytes in /dev/shm: {}); using its socket", rank,
                  peer, bytes, std::strerror(error));
    return nullptr;
  }
  return std::unique_ptr<ShmSender>(new ShmSender(std::make_shared<ShmSegment>(name, base, bytes)));
}

ShmSender::~ShmSender() { ::shm_unlink(segment_->name().c_str()); }

std::optional<ShmNotice> ShmSender::tryPut(std::span<const std::byte> header, std::span<const std::byte> payload) {
  const std::uint32_t index = next_;
  auto& state = segment_->state(index);
  if (state.load(std::memory_order_acquire) != kFree) return std::nullopt;
  std::byte* out = segment_->slot(index);
  std::memcpy(out, header.data(), header.size());
  if (!payload.empty()) std::memcpy(out + header.size(), payload.data(), payload.size());
  state.store(kFull, std::memory_order_release);
  next_ = (next_ + 1) % ShmSegment::kSlots;
  return ShmNotice{index, header.size() + payload.size(), segment_->name()};
}

std::shared_ptr<ShmSegment> openShmSegment(const std::string& name) {
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) throw CommError(fmt::format("cannot open the shared-memory lane {}: {}", name, std::strerror(errno)));
  const std::size_t bytes = ShmSegment::segmentBytes();
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int error = errno;
  ::close(fd);
  ::shm_unlink(name.c_str());
  if (base == MAP_FAILED) throw CommError(fmt::format("cannot map the shared-memory lane {}: {}", name, std::strerror(error)));
  return std::make_shared<ShmSegment>(name, base, bytes);
}

}  // namespace hpu::comm::detail
