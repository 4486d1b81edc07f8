// Shared-memory lanes: how ZmqTransport moves messages between ranks on the
// same machine without the sockets (their copies, and the hops through
// ZeroMQ's I/O threads that cost more than the copies for small messages).
//
// A lane goes one way, sender -> receiver: a POSIX shared-memory segment
// (mode 0600) of kSlots slots, each holding one message (header + payload),
// its state (free or full) and its link sequence number. Every message on the link is numbered; the sender
// copies a message into the next slot in turn if the receiver freed it, else
// sends it over the socket (a send never waits for the receiver, which the
// collectives rely on), then counts it in posted() and wakes the receiver if
// it sleeps there (a futex). The receiver takes message number s from the
// next slot in turn if that slot holds s, else from the socket, so the
// messages of a link are read in order whichever way they travelled; a
// message counted as posted before the receiver looked in the lane, and not
// there, is on the socket. It reads a slot in place and frees it when the
// message is destroyed.
//
// Memory: the segment is sparse; the sender reserves (posix_fallocate) the
// pages a message needs before writing them, so a lane costs what its
// largest messages need (8.1 MiB at most) and a full /dev/shm sends the message
// over the socket instead of raising SIGBUS.
//
// The sender announces the lane's name once over the socket, before the
// lane's first message; the receiver maps the segment then, unlinks its name
// (both sides hold the mapping from then on) and marks it opened. A sender
// closing a lane its receiver has not opened yet waits for that (bounded, as
// a socket lingers), then unlinks the name itself; only a sender that dies
// in between leaves a /dev/shm/hpu-train-* file.
//
// Thread-safety: a lane's sender and receiver are each used by one thread at
// a time; a slot is freed from whichever thread destroys its message.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
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

  static std::size_t segmentBytes();
  const std::string& name() const { return name_; }

  // Sender: message number `sequence` was sent (either way); wakes the
  // receiver if it sleeps in waitForPost.
  void posted(std::uint32_t sequence);
  // Receiver: true once message number `sequence` was sent (either way).
  bool wasPosted(std::uint32_t sequence);
  // Receiver: sleeps until the sender posts message number `sequence`, at
  // most `timeout` (or less: callers check again).
  void waitForPost(std::uint32_t sequence, std::chrono::milliseconds timeout);
  // Set by the receiver once it mapped the segment.
  std::atomic<std::uint32_t>& opened();

  // What a slot holds: written by the sender before it sets state to 1,
  // read by the receiver after it saw state 1.
  struct SlotLine {
    std::atomic<std::uint32_t> state;  // 1 while the slot holds a message, 0 when it is free
    std::uint32_t sequence;            // the message's link sequence number
    std::uint32_t bytes;               // header + payload
  };
  SlotLine& line(std::uint32_t index);
  std::byte* slot(std::uint32_t index);
  void release(std::uint32_t index);

 private:
  std::atomic<std::uint32_t>& word(std::size_t offset);

  std::string name_;
  void* base_;
  std::size_t bytes_;
};

class ShmSender {
 public:
  // Creates this rank's lane to `peer`; nullptr when shared memory is not
  // available (the caller keeps using its socket).
  static std::unique_ptr<ShmSender> create(int rank, int peer);
  // Unlinks the name (the receiver normally did already).
  ~ShmSender();

  // Waits until the receiver opened the lane, if a message was put in it,
  // at most until `deadline`, or until `stopWaiting` (optional, polled)
  // returns true. Call it before a clean close.
  void awaitReceiver(std::chrono::steady_clock::time_point deadline, const std::function<bool()>& stopWaiting = {});
  void awaitReceiver(std::chrono::milliseconds limit) { awaitReceiver(std::chrono::steady_clock::now() + limit); }

  static bool fits(std::size_t bytes) { return bytes <= ShmSegment::kSlotBytes; }
  ShmSegment& segment() { return *segment_; }
  // Copies message number `sequence` into the next slot in turn; false
  // (nothing copied) when that slot is still in use or /dev/shm is full.
  // REQUIRES: fits(header.size() + payload.size()).
  bool tryPut(std::uint32_t sequence, std::span<const std::byte> header, std::span<const std::byte> payload);

 private:
  ShmSender(std::shared_ptr<ShmSegment> segment, int fd) : segment_(std::move(segment)), fd_(fd) {}
  // Reserves the first `bytes` of slot `index`; false when /dev/shm is full.
  bool reserve(std::uint32_t index, std::size_t bytes);

  std::shared_ptr<ShmSegment> segment_;
  int fd_;
  std::uint32_t next_ = 0;
  bool used_ = false;  // a message was put in a slot
  std::array<std::size_t, ShmSegment::kSlots> reserved_{};  // bytes of each slot backed by memory
};

class ShmReceiver {
 public:
  // Maps a sender's segment and unlinks its name. Throws CommError when it cannot.
  explicit ShmReceiver(const std::string& name);

  ShmSegment& segment() { return *segment_; }
  // Message number `sequence` if the next slot in turn holds it, else
  // nullptr. Throws CommError when the slot claims more bytes than it has.
  std::unique_ptr<Message> tryTake(std::uint32_t sequence);

 private:
  std::shared_ptr<ShmSegment> segment_;
  std::uint32_t next_ = 0;
};

}  // namespace hpu::comm::detail
