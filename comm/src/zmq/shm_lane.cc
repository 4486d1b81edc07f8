#include "shm_lane.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sodium.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <thread>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "../check.h"
#include "hpu/comm/errors.h"

namespace hpu::comm::detail {
namespace {

constexpr std::uint32_t kFree = 0;
constexpr std::uint32_t kFull = 1;

// Layout: one cache line each for the posted count, the receiver's sleeping
// flag, its opened flag and every slot's line; then page-aligned slots.
constexpr std::size_t kLine = 64;
constexpr std::size_t kPostedOffset = 0;
constexpr std::size_t kSleepingOffset = kLine;
constexpr std::size_t kOpenedOffset = 2 * kLine;
constexpr std::size_t kSlotLinesOffset = 3 * kLine;
constexpr std::size_t kSlotsOffset = 4096;
static_assert(kSlotLinesOffset + ShmSegment::kSlots * kLine <= kSlotsOffset);
static_assert(ShmSegment::kSlotBytes % 4096 == 0);
static_assert(sizeof(ShmSegment::SlotLine) <= kLine && std::atomic<std::uint32_t>::is_always_lock_free);

// Sequence numbers wrap; a link never has 2^31 messages in flight.
bool reached(std::uint32_t count, std::uint32_t sequence) { return static_cast<std::int32_t>(count - sequence) > 0; }

// The words are shared between processes: plain (not private) futexes.
std::uint32_t* futexWord(std::atomic<std::uint32_t>& word) { return reinterpret_cast<std::uint32_t*>(&word); }

class SlotMessage final : public Message {
 public:
  SlotMessage(std::shared_ptr<ShmSegment> segment, std::uint32_t index, std::size_t bytes)
      : segment_(std::move(segment)), index_(index), bytes_(bytes) {}
  ~SlotMessage() override { segment_->release(index_); }
  std::span<const std::byte> bytes() const override { return {segment_->slot(index_), bytes_}; }

 private:
  std::shared_ptr<ShmSegment> segment_;
  std::uint32_t index_;
  std::size_t bytes_;
};

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

std::atomic<std::uint32_t>& ShmSegment::word(std::size_t offset) {
  return *reinterpret_cast<std::atomic<std::uint32_t>*>(static_cast<std::byte*>(base_) + offset);
}

void ShmSegment::posted(std::uint32_t sequence) {
  word(kPostedOffset).store(sequence + 1, std::memory_order_seq_cst);
  if (word(kSleepingOffset).load(std::memory_order_seq_cst) != 0)
    ::syscall(SYS_futex, futexWord(word(kPostedOffset)), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

bool ShmSegment::wasPosted(std::uint32_t sequence) {
  return reached(word(kPostedOffset).load(std::memory_order_acquire), sequence);
}

void ShmSegment::waitForPost(std::uint32_t sequence, std::chrono::milliseconds timeout) {
  auto& posted = word(kPostedOffset);
  auto& sleeping = word(kSleepingOffset);
  // The sender stores posted, then reads sleeping; we store sleeping, then
  // read posted (all sequentially consistent): one of us sees the other.
  sleeping.store(1, std::memory_order_seq_cst);
  const std::uint32_t seen = posted.load(std::memory_order_seq_cst);
  if (!reached(seen, sequence)) {
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(timeout);
    const timespec limit{static_cast<time_t>(seconds.count()),
                         static_cast<long>(std::chrono::nanoseconds(timeout - seconds).count())};
    ::syscall(SYS_futex, futexWord(posted), FUTEX_WAIT, seen, &limit, nullptr, 0);
  }
  sleeping.store(0, std::memory_order_relaxed);
}

std::atomic<std::uint32_t>& ShmSegment::opened() { return word(kOpenedOffset); }

ShmSegment::SlotLine& ShmSegment::line(std::uint32_t index) {
  return *reinterpret_cast<SlotLine*>(static_cast<std::byte*>(base_) + kSlotLinesOffset + index * kLine);
}

std::byte* ShmSegment::slot(std::uint32_t index) {
  return static_cast<std::byte*>(base_) + kSlotsOffset + index * kSlotBytes;
}

void ShmSegment::release(std::uint32_t index) { line(index).state.store(kFree, std::memory_order_release); }

std::unique_ptr<ShmSender> ShmSender::create(int rank, int peer) {
  const std::string name = laneName(rank, peer);
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    spdlog::debug("rank {}: no shared-memory lane to rank {} ({}: {}); using its socket", rank, peer, name,
                  std::strerror(errno));
    return nullptr;
  }
  const std::size_t bytes = ShmSegment::segmentBytes();
  int error = ::ftruncate(fd, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
  if (error == 0) error = ::posix_fallocate(fd, 0, static_cast<off_t>(kSlotsOffset));
  void* base = error == 0 ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (error == 0 && base == MAP_FAILED) error = errno;
  if (base == MAP_FAILED) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    spdlog::debug("rank {}: no shared-memory lane to rank {} ({}: {}); using its socket", rank, peer, name,
                  std::strerror(error));
    return nullptr;
  }
  return std::unique_ptr<ShmSender>(new ShmSender(std::make_shared<ShmSegment>(name, base, bytes), fd));
}

ShmSender::~ShmSender() {
  ::close(fd_);
  ::shm_unlink(segment_->name().c_str());
}

void ShmSender::awaitReceiver(std::chrono::steady_clock::time_point deadline, const std::function<bool()>& stopWaiting) {
  while (used_ && segment_->opened().load(std::memory_order_acquire) == 0 &&
         std::chrono::steady_clock::now() < deadline && !(stopWaiting && stopWaiting()))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

bool ShmSender::reserve(std::uint32_t index, std::size_t bytes) {
  if (bytes <= reserved_[index]) return true;
  const std::size_t pages = (bytes + 4095) / 4096 * 4096;
  const auto offset = static_cast<off_t>(kSlotsOffset + index * ShmSegment::kSlotBytes);
  if (::posix_fallocate(fd_, offset, static_cast<off_t>(pages)) != 0) return false;
  reserved_[index] = pages;
  return true;
}

bool ShmSender::tryPut(std::uint32_t sequence, std::span<const std::byte> header, std::span<const std::byte> payload) {
  const std::uint32_t index = next_;
  auto& line = segment_->line(index);
  const std::size_t bytes = header.size() + payload.size();
  if (line.state.load(std::memory_order_acquire) != kFree || !reserve(index, bytes)) return false;
  std::byte* out = segment_->slot(index);
  std::memcpy(out, header.data(), header.size());
  if (!payload.empty()) std::memcpy(out + header.size(), payload.data(), payload.size());
  line.sequence = sequence;
  line.bytes = static_cast<std::uint32_t>(bytes);
  line.state.store(kFull, std::memory_order_release);
  next_ = (next_ + 1) % ShmSegment::kSlots;
  used_ = true;
  return true;
}

ShmReceiver::ShmReceiver(const std::string& name) {
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) throw CommError(fmt::format("cannot open the shared-memory lane {}: {}", name, std::strerror(errno)));
  const std::size_t bytes = ShmSegment::segmentBytes();
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int error = errno;
  ::close(fd);
  ::shm_unlink(name.c_str());
  if (base == MAP_FAILED) throw CommError(fmt::format("cannot map the shared-memory lane {}: {}", name, std::strerror(error)));
  segment_ = std::make_shared<ShmSegment>(name, base, bytes);
  segment_->opened().store(1, std::memory_order_release);
}

std::unique_ptr<Message> ShmReceiver::tryTake(std::uint32_t sequence) {
  const std::uint32_t index = next_;
  const auto& line = segment_->line(index);
  if (line.state.load(std::memory_order_acquire) != kFull || line.sequence != sequence) return nullptr;
  if (line.bytes > ShmSegment::kSlotBytes)  // another process wrote it: an error, not a broken invariant of ours
    throw CommError(fmt::format("the shared-memory lane {} is corrupt: slot {} claims {} bytes, more than its {}",
                                segment_->name(), index, line.bytes, ShmSegment::kSlotBytes));
  next_ = (next_ + 1) % ShmSegment::kSlots;
  return std::make_unique<SlotMessage>(segment_, index, line.bytes);
}

}  // namespace hpu::comm::detail
