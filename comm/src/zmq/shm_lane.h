// Shared-memory lanes: how ZmqTransport moves large messages between ranks
// on the same machine without copying them through sockets.
//
// A lane goes one way, sender -> receiver: a POSIX shared-memory segment
// (mode 0600, its pages reserved with posix_fallocate, so a full /dev/shm
// fails at creation instead of with SIGBUS later) of kSlots slots, each
// holding one message (header + payload) and a state word. The sender copies
// a message into the next slot in turn if the receiver freed it (else the
// message goes over the socket: a send never waits for the receiver, which
// the collectives rely on), and sends the receiver a small ZeroMQ notice
// naming the segment and the slot, so the peer's messages stay in order
// whichever way their bytes travel. The receiver maps the segment at its
// first notice and unlinks its name (both sides hold the mapping from then
// on), reads the message in place and frees the slot when the message is
// destroyed.
//
// Cleanup: the sender unlinks the name when the lane is destroyed in case
// the receiver never opened it; only a sender that dies between creating a
// lane and its receiver's first notice leaves a /dev/shm/hpu-train-* file.
//
// Thread-safety: a ShmSender is used by one thread at a time; a slot is
// freed from whichever thread destroys the message read from it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "hpu/comm/transport.h"

namespace hpu::comm::detail {

// A mapped lane segment (either side).
class ShmSegment {
 public:
  static constexpr std::uint32_t kSlots = 32;
  // One ring chunk (ProcessGroupOptions::chunkBytes, 256 KiB by default)
  // with its header and room to spare; larger messages go over the socket.
  static constexpr std::size_t kSlotBytes = (256u << 10) + (4u << 10);

  ShmSegment(std::string name, void* base, std::size_t bytes) : name_(std::move(name)), base_(base), bytes_(bytes) {}
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  const std::string& name() const { return name_; }
  // 1 while the slot holds a message, 0 when it is free.
  std::atomic<std::uint32_t>& state(std::uint32_t index);
  std::byte* slot(std::uint32_t index);
  void release(std::uint32_t index);

  static std::size_t segmentBytes();

 private:
  std::string name_;
  void* base_;
  std::size_t bytes_;
};

// What the receiver needs to find a message: carried by the ZeroMQ notice.
struct ShmNotice {
  std::uint32_t slot = 0;
  std::uint64_t bytes = 0;
  std::string segment;  // the lane's shared-memory name
};

// Notice wire format: u32 slot | u64 bytes | segment name (the rest).
std::string encodeNotice(const ShmNotice& notice);
std::optional<ShmNotice> decodeNotice(std::span<const std::byte> bytes);

class ShmSender {
 public:
  // Creates this rank's lane to `peer`; nullptr when shared memory is not
  // available (the caller keeps using its socket).
  static std::unique_ptr<ShmSender> create(int rank, int peer);
  ~ShmSender();

  static bool fits(std::size_t bytes) { return bytes <= ShmSegment::kSlotBytes; }
  // Copies `header` and `payload` into the next slot and returns the notice
  // for the receiver; nullopt when that slot is still in use.
  // REQUIRES: fits(header.size() + payload.size()).
  std::optional<ShmNotice> tryPut(std::span<const std::byte> header, std::span<const std::byte> payload);

 private:
  explicit ShmSender(std::shared_ptr<ShmSegment> segment) : segment_(std::move(segment)) {}
  std::shared_ptr<ShmSegment> segment_;
  std::uint32_t next_ = 0;
};

// The receiving side: maps a sender's segment (and unlinks its name).
// Throws CommError when it cannot.
std::shared_ptr<ShmSegment> openShmSegment(const std::string& name);

// A message read in place from a slot, freed when destroyed.
class ShmMessage final : public Message {
 public:
  ShmMessage(std::shared_ptr<ShmSegment> segment, std::uint32_t slot, std::size_t bytes)
      : segment_(std::move(segment)), slot_(slot), bytes_(bytes) {}
  ~ShmMessage() override { segment_->release(slot_); }
  std::span<const std::byte> bytes() const override { return {segment_->slot(slot_), bytes_}; }

 private:
  std::shared_ptr<ShmSegment> segment_;
  std::uint32_t slot_;
  std::size_t bytes_;
};

}  // namespace hpu::comm::detail
