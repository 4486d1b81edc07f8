// One running collective as its algorithm sees it: the transport, the
// descriptor every message is stamped with, the deadline, and the chunking
// plan. recv() validates every incoming header against this rank's own
// descriptor and turns transport errors into messages that name the rank,
// the collective and the peer.
//
// A context may be narrowed to a subgroup of the job's ranks (the ranks of
// one node, or one rank per node): the hierarchical collectives run the flat
// algorithms on such subgroups one after the other. Inside a subgroup rank(),
// size() and the peers given to send/recv are positions in its member list;
// messages keep their step count per link across subgroups of the same
// collective, and errors name global ranks.
// Thread-safety: used by the one thread running the collective.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "descriptor.h"
#include "hpu/comm/errors.h"
#include "hpu/comm/process_group.h"
#include "hpu/comm/transport.h"

namespace hpu::comm::detail {

// A step never has more chunks than this; bigger buffers get bigger chunks.
inline constexpr std::size_t kMaxChunksPerStep = 1024;
// Largest payload of one message; the receive sockets cap messages just above it.
inline constexpr std::size_t kMaxMessagePayload = 64u << 20;

using Range = ProcessGroup::Range;

struct Received {
  std::unique_ptr<Message> message;
  std::span<const std::byte> payload;
};

class CollectiveContext {
 public:
  CollectiveContext(Transport& transport, const CollectiveDescriptor& descriptor, Transport::Deadline deadline,
                    std::chrono::milliseconds timeout, std::size_t chunkBytes);
  ~CollectiveContext();
  CollectiveContext(const CollectiveContext&) = default;

  // The same collective among `members` (global ranks, ascending or in any
  // order every member agrees on; this rank among them).
  CollectiveContext subgroup(std::vector<int> members) const;

  int rank() const { return position_; }
  int size() const { return static_cast<int>(members_.size()); }
  const CollectiveDescriptor& descriptor() const { return descriptor_; }
  std::size_t elementSize() const { return comm::elementSize(descriptor_.dtype); }

  // Peers are positions in this context's member list.
  void send(int peer, std::span<const std::byte> payload) { sendMessage(peer, std::nullopt, payload, false); }
  // The next message from `peer`. Throws CollectiveMismatchError when it
  // belongs to a different collective, CommError when its payload is not
  // `expectedBytes` long.
  Received recv(int peer, std::size_t expectedBytes) {
    return receiveMessage(peer, std::nullopt, expectedBytes, deadline_);
  }
  // Like recv, with another deadline (Clock::now(): only a message that has
  // already arrived).
  Received recvBy(int peer, std::size_t expectedBytes, Transport::Deadline deadline) {
    return receiveMessage(peer, std::nullopt, expectedBytes, deadline);
  }

  // For collectives whose pairs of ranks exchange blocks of different sizes
  // (alltoall): the message's header carries `count`, the elements of the
  // block this pair exchanges, in place of the descriptor's. recvBlock
  // throws CollectiveMismatchError naming both ranks and both counts when
  // the sender's count is not `count`.
  // postBlock sends through Transport::post; true if the message was queued:
  // `payload` must then stay unchanged until flushSends() returns (a context
  // destroyed before that, by an error, makes queued messages own their bytes).
  bool postBlock(int peer, std::uint64_t count, std::span<const std::byte> payload) {
    return sendMessage(peer, count, payload, /*post=*/true);
  }
  // Returns once every message postBlock queued is taken (Transport::flushSends).
  void flushSends();
  Received recvBlock(int peer, std::uint64_t count, std::size_t expectedBytes) {
    return receiveMessage(peer, count, expectedBytes, deadline_);
  }
  // The payload of the next message from `peer` not described yet belongs
  // at `destination` (Transport::expect): the transport may put it there,
  // and the Received payload is then that very span. Every expectation is
  // forgotten when the context is destroyed.
  void expectPayload(int peer, std::span<std::byte> destination);
  Transport::Deadline deadline() const { return deadline_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // For waits outside the transport (native collectives): throws
  // PeerLostError when a rank is lost or this one aborted, CommTimeoutError
  // past the deadline.
  void checkAlive() const;

  // How many chunks a block of `elements` elements is streamed in.
  std::size_t chunksFor(std::size_t elements) const;
  // Chunk `index` of `chunks` of `block` (element ranges in the whole buffer).
  static Range chunkOf(Range block, std::size_t chunks, std::size_t index);

 private:
  // The message primitives; `block` is the pair's count of sendBlock and
  // recvBlock, nullopt the descriptor's count; `post`: Transport::post.
  // Returns whether the message was queued.
  bool sendMessage(int peer, std::optional<std::uint64_t> block, std::span<const std::byte> payload, bool post);
  Received receiveMessage(int peer, std::optional<std::uint64_t> block, std::size_t expectedBytes,
                          Transport::Deadline deadline);
  // `e` as this collective's failure (this rank and the collective named).
  PeerLostError failedWith(const PeerLostError& e) const;
  // Rethrows a transport error with this collective's context; `peer` is a global rank.
  [[noreturn]] void rethrowWithContext(int peer) const;
  // What every subgroup of one collective shares: per-link step counts and
  // the header scratch.
  struct Links {
    std::vector<std::uint32_t> sendSteps;  // per global rank
    std::vector<std::uint32_t> recvSteps;
    std::vector<std::byte> prefix;  // header, then the barrier name
    bool expecting = false;         // expectPayload was called
    bool posting = false;           // postBlock was called since flushSends
  };
  int global(int position) const { return members_[static_cast<std::size_t>(position)]; }

  Transport& transport_;
  const CollectiveDescriptor& descriptor_;
  Transport::Deadline deadline_;
  std::chrono::milliseconds timeout_;
  std::size_t chunkBytes_;
  int rank_;  // global
  std::vector<int> members_;  // global ranks by position
  int position_;              // this rank's position in members_
  std::shared_ptr<Links> links_;
};

}  // namespace hpu::comm::detail
