// The seam between collective algorithms and the wire: ordered,
// point-to-point messages between the ranks of one job. ZeroMQ implements it
// across processes (ipc:// and shared memory within a node, tcp:// across
// nodes), memory implements it for ranks-as-threads.
//
// Messages from one peer arrive in the order that peer sent them. A
// transport also watches the job's health: send and recv throw PeerLostError
// as soon as any rank is known to be gone (collectives need every rank), and
// CommTimeoutError when their deadline passes.
//
// Thread-safety: one thread at a time may call send/recv (the process group
// serialises its collectives); abort() and setActivity() may be called from
// any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

namespace hpu::comm {

// One received message; owns its bytes.
class Message {
 public:
  virtual ~Message() = default;
  virtual std::span<const std::byte> bytes() const = 0;
  // Where the transport put the payload, if it read it straight into the
  // destination Transport::expect gave; bytes() then holds the header alone.
  // nullopt: the payload follows the header in bytes().
  virtual std::optional<std::span<const std::byte>> placedPayload() const { return std::nullopt; }
};

class Transport {
 public:
  using Clock = std::chrono::steady_clock;
  using Deadline = Clock::time_point;

  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // An id of the node `rank` runs on, equal for the ranks that share one
  // (and its shared memory); the hierarchical collectives group ranks by it.
  // By default every rank is a node of its own.
  virtual int node(int rank) const { return rank; }
  // Queues `header` followed by `payload` as one message to `peer` and
  // returns; the bytes are copied. Blocks only for flow control.
  // REQUIRES: 0 <= peer < size(), peer != rank().
  virtual void send(int peer, std::span<const std::byte> header, std::span<const std::byte> payload,
                    Deadline deadline) = 0;
  // Like send, but may queue the message and return before `payload` is
  // taken (`header` is copied); true if it did: the caller then keeps
  // `payload` unchanged until flushSends() returns or ownPosted() is called.
  // A rank that posts to several peers keeps writing to those that can take
  // more while others cannot. Transports without a send queue send at once
  // and return false (the default).
  // REQUIRES: as send.
  virtual bool post(int peer, std::span<const std::byte> header, std::span<const std::byte> payload,
                    Deadline deadline) {
    send(peer, header, payload, deadline);
    return false;
  }
  // Returns once every message post() queued is taken as send takes it;
  // throws as send.
  virtual void flushSends(Deadline deadline) {}
  // Makes the messages post() queued own their payloads, for a caller about
  // to give up their memory (an operation that failed with sends queued).
  virtual void ownPosted() {}
  // The next message from `peer` (header and payload, as sent).
  // REQUIRES: 0 <= peer < size(), peer != rank().
  virtual std::unique_ptr<Message> recv(int peer, Deadline deadline) = 0;
  // For a receiver that knows where a payload belongs: the next message from
  // `peer` that no earlier call described may have its payload read straight
  // into `destination` (saving a copy), if its header is `headerBytes` long
  // and its payload destination.size(); its Message then says so
  // (placedPayload). Transports that cannot place payloads ignore it (the
  // default). The transport may write to `destination` until that message
  // is received or forgetExpectations() returns.
  virtual void expect(int peer, std::size_t headerBytes, std::span<std::byte> destination) {}
  // Drops every expectation: from its return on, nothing is written to their
  // destinations, and messages still to be received own their payloads.
  virtual void forgetExpectations() {}
  // Tells every other rank that this one fails with `reason`; they fail
  // their operations with PeerLostError naming this rank. Does not block.
  virtual void abort(std::string_view reason) = 0;
  // What this rank is doing ("allreduce #57 (sum, float32, 1024 elements)"),
  // reported with its heartbeats so a peer-lost error can say where it was.
  virtual void setActivity(std::string_view activity) = 0;
  // Throws PeerLostError if a rank is known to be gone or this one aborted,
  // as send and recv would (for waits on something else: native collectives).
  virtual void checkHealth() const {}
  // Fault injection (fault_injection.h): from now on this rank sends nothing
  // and delivers nothing, control plane included, as if its network were cut;
  // peers declare it lost after their peer timeout. Transports without a
  // network (threads, simulations) keep working.
  virtual void dropConnectionsForTesting() {}
};

}  // namespace hpu::comm
