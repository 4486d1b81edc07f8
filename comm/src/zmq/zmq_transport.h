// The data plane of a ZeroMQ job. Between ranks of one node: each rank binds
// one PULL socket on ipc:// (Linux's abstract namespace) and connects one
// PUSH socket per peer of its node; messages carry the sender's rank in a
// prefix, and those from other peers than the one being waited for are kept
// in per-peer queues, so each peer's messages are read in the order it sent
// them. Between nodes: TCP links the rank's own thread reads and writes
// (tcp/tcp_links.h). Waits poll in slices of at most 100 ms and check
// PeerHealth between slices, and whether this rank aborted: abort() fails
// the operation in flight within a slice (PeerLostError naming this rank),
// as it fails the other ranks'.
// Messages to a rank of the same node go through a shared-memory lane
// (shm_lane.h) when /dev/shm allows one and a slot is free, the others over
// the socket; every message carries its link sequence number, so each
// peer's messages are still read in order. A wait for a message not sent
// yet sleeps on the lane, a wait for one on its way polls the socket. While
// a rank waits on a peer of its node, it keeps reading its TCP links every
// millisecond, so a peer on another node is never held up by its full
// socket buffers.
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
#include "../tcp/tcp_links.h"

namespace hpu::comm::detail {

class ZmqTransport final : public Transport {
 public:
  // Binds the inbound ipc socket, and listens for TCP links on `localAddress`.
  ZmqTransport(std::shared_ptr<ZmqSession> session, int rank, int size, const ResolvedAddress& localAddress);
  ~ZmqTransport() override;

  const Endpoints& endpoints() const { return endpoints_; }
  // Connects to every peer of the published table: the TCP links are up
  // when it returns. Throws RendezvousError if they are not by `deadline`.
  // REQUIRES: peers.size() == size().
  void connectPeers(const PeerTable& peers, Deadline deadline);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // Ranks of one node share hostId and nodeRank in the peer table.
  int node(int rank) const override { return nodeOf_[static_cast<std::size_t>(rank)]; }
  void send(int peer, std::span<const std::byte> header, std::span<const std::byte> payload,
            Deadline deadline) override;
  // Over a TCP link a queued send; within the node a send.
  bool post(int peer, std::span<const std::byte> header, std::span<const std::byte> payload,
            Deadline deadline) override;
  void flushSends(Deadline deadline) override;
  void ownPosted() override;
  std::unique_ptr<Message> recv(int peer, Deadline deadline) override;
  // Payloads are placed for peers over TCP links only (tcp_links.h).
  void expect(int peer, std::size_t headerBytes, std::span<std::byte> destination) override;
  void forgetExpectations() override;
  void abort(std::string_view reason) override;
  void setActivity(std::string_view activity) override;
  void checkHealth() const override;
  void dropConnectionsForTesting() override;

 private:
  void drainInbound();
  std::unique_ptr<Message> recvOverLink(int peer, Deadline deadline);
  // Gives the core to another runnable thread, if there is one.
  void yieldCore();
  void sendOverSocket(int peer, std::uint32_t senderWord, std::uint32_t sequence, std::span<const std::byte> header,
                      std::span<const std::byte> payload, Deadline deadline);
  // The lane to `peer`, created (and announced) at the first message; nullptr
  // for a peer on another node or without shared memory.
  ShmSender* laneTo(int peer, Deadline deadline);
  // The next message from `peer` if it is here (in its lane or its queue).
  std::unique_ptr<Message> takeNext(int peer);
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
  std::vector<int> nodeOf_;  // per rank: the index of its (hostId, nodeRank) in the peer table
  std::vector<bool> sameNode_;  // peers on ipc:// and (while /dev/shm allows) shared memory
  std::vector<bool> linked_;    // peers on other nodes: over tcp_
  std::unique_ptr<TcpLinks> tcp_;
  bool anyLink_ = false;
  std::vector<std::unique_ptr<ShmSender>> lanesOut_;
  std::vector<std::unique_ptr<ShmReceiver>> lanesIn_;
  std::vector<std::uint32_t> sendSequence_;  // the next message's number, per peer
  std::vector<std::uint32_t> recvSequence_;  // the number of the message expected next, per peer
  std::shared_ptr<SendBufferPool> sendBuffers_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> dropped_{false};  // dropConnectionsForTesting: nothing goes out or comes in
  std::size_t takenSinceYield_ = 0;   // bytes received over links since yieldCore()
  mutable std::mutex abortMutex_;
  std::string abortReason_;  // "rank 3 aborted: <reason>", set once
};

}  // namespace hpu::comm::detail
