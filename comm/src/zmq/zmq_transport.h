// The data plane over ZeroMQ. Each rank binds one PULL socket on two
// endpoints (tcp:// on the address facing rank 0, ipc:// in Linux's abstract
// namespace) and connects one PUSH socket per peer: ipc:// to ranks of the
// same node on the same machine, tcp:// to everyone else. Messages carry the
// sender's rank in a 4-byte prefix; those from other peers than the one
// being waited for are kept in per-peer queues, so each peer's messages are
// read in the order it sent them. Waits poll in slices of at most 100 ms and
// check PeerHealth between slices, and whether this rank aborted: abort()
// fails the operation in flight within a slice (PeerLostError naming this
// rank), as it fails the other ranks'.
// Messages of 16 KiB and more to a rank of the same node travel through a
// shared-memory lane (shm_lane.h) when /dev/shm allows one; the socket then
// carries only a notice, in the same per-peer order.
// Thread-safety: as Transport (one thread at a time sends and receives).
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "../log_limiter.h"
#include "../wire/control_messages.h"
#include "hpu/comm/transport.h"
#include "net.h"
#include "send_buffers.h"
#include "session.h"
#include "shm_lane.h"

namespace hpu::comm::detail {

class ZmqTransport final : public Transport {
 public:
  // Binds the inbound socket (tcp on `localAddress`, and ipc).
  ZmqTransport(std::shared_ptr<ZmqSession> session, int rank, int size, const ResolvedAddress& localAddress);
  ~ZmqTransport() override;

  const Endpoints& endpoints() const { return endpoints_; }
  // Connects to every peer of the published table.
  // REQUIRES: peers.size() == size().
  void connectPeers(const std::vector<PeerInfo>& peers);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void send(int peer, std::span<const std::byte> header, std::span<const std::byte> payload,
            Deadline deadline) override;
  std::unique_ptr<Message> recv(int peer, Deadline deadline) override;
  void abort(std::string_view reason) override;
  void setActivity(std::string_view activity) override;

 private:
  void drainInbound();
  // The lane for a message of `messageBytes` to `peer`, created at first use;
  // nullptr when the message goes over the socket.
  ShmSender* laneTo(int peer, std::size_t messageBytes);
  std::unique_ptr<Message> readFromLane(int peer, const zmq::message_t& notice);
  // Throws PeerLostError naming this rank once abort() was called.
  void checkNotAborted() const;

  std::shared_ptr<ZmqSession> session_;
  const int rank_;
  const int size_;
  zmq::socket_t inbound_;
  Endpoints endpoints_;
  std::vector<std::optional<zmq::socket_t>> outbound_;
  std::vector<std::deque<zmq::message_t>> pending_;
  LogLimiter limiter_;
  std::vector<bool> sameNode_;  // peers on ipc:// and (while /dev/shm allows) shared memory
  std::vector<std::unique_ptr<ShmSender>> lanesOut_;
  std::vector<std::shared_ptr<ShmSegment>> lanesIn_;
  std::shared_ptr<SendBufferPool> sendBuffers_;
  std::atomic<bool> aborted_{false};
  mutable std::mutex abortMutex_;
  std::string abortReason_;  // "rank 3 aborted: <reason>", set once
};

}  // namespace hpu::comm::detail
