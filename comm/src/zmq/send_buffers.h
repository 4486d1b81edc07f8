// Reusable buffers for large outgoing ZeroMQ messages. A message built in a
// fresh allocation of a few hundred KiB costs page faults on every send
// (glibc maps and unmaps blocks that large, or trims its heap after them),
// which cost more than copying the bytes; a message built in one of these
// buffers hands it back once ZeroMQ's I/O thread has sent it.
// Thread-safety: message() is called by the sending thread and buffers come
// back on ZeroMQ's I/O thread; the pool synchronises itself and lives as
// long as any of its buffers is still queued in ZeroMQ.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <zmq.hpp>

namespace hpu::comm::detail {

class SendBufferPool : public std::enable_shared_from_this<SendBufferPool> {
 public:
  // One ring chunk (256 KiB by default) with its header and room to spare.
  static constexpr std::size_t kBufferBytes = (256u << 10) + (4u << 10);
  // Smaller messages come from malloc's bins without page faults.
  static constexpr std::size_t kMinMessageBytes = 64u << 10;
  // Idle buffers kept; more come back only after a burst and are freed.
  static constexpr std::size_t kMaxIdle = 32;

  // A message of `bytes` in a pooled buffer; nullopt when `bytes` is outside
  // [kMinMessageBytes, kBufferBytes].
  std::optional<zmq::message_t> message(std::size_t bytes);

 private:
  struct Buffer {
    std::unique_ptr<std::byte[]> bytes = std::make_unique<std::byte[]>(kBufferBytes);
    std::shared_ptr<SendBufferPool> pool;  // set while ZeroMQ holds the buffer
  };
  static void giveBack(void* data, void* hint);

  std::mutex mutex_;
  std::vector<std::unique_ptr<Buffer>> idle_;
};

}  // namespace hpu::comm::detail
