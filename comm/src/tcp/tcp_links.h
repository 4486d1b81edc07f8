// The data plane between nodes: one TCP connection per pair of ranks on
// different nodes, read and written by the rank's own thread. ZeroMQ hands
// every message to an I/O thread and back, two context switches per message
// each way; a 4-byte allreduce between two nodes took 70 us that way against
// Open MPI's 9 us, and large messages paid an extra copy into ZeroMQ's
// buffers. Here a send is one sendmsg from the caller's memory, a receive
// one read into the message's own buffer.
//
// Connections. Every rank listens on one port (endpoint(), published in the
// peer table); of each pair, the lower rank connects and the higher one
// accepts. connect() sets them all up before the first collective, in an
// order that needs no rank to wait for one that is waiting itself: every
// rank first connects and says hello to all higher peers, then answers the
// hellos of all lower ones, then finishes its own handshakes.
//
// Handshake (link_handshake.h): both ends prove they hold the job's data
// link key (derived from the job token) over a transcript of both ranks and
// a fresh nonce from each end, and derive one key per direction from it.
// With encryption (every address but loopback, as ZeroMQ's CURVE was), each
// direction is a libsodium secretstream (XChaCha20-Poly1305): messages are
// authenticated, in order, and cannot be replayed or cut.
//
// Frames: a 4-byte little-endian length, then the message (encrypted: its
// ciphertext). A frame longer than `maxMessageBytes` (plus the cipher's tag)
// breaks the link.
//
// Placement: a receiver may say where the payload of a coming message
// belongs (expect); a plain frame of that size is then read into it, past
// its header, instead of into a buffer of the link's, which saves the copy
// (an alltoall's blocks land in its output), and a frame not begun yet is
// read with its header in one read. A frame of another size (a mismatch its
// receiver reports) may leave bytes there before they move to its buffer.
//
// Flow: each link writes its messages in order. send() returns once the
// whole message is in the kernel's buffers; post() queues it and returns,
// and what is queued is written whenever this rank waits (send, flush,
// progress) and the link has room. While waiting, a rank reads every link,
// so two ranks sending to each other never block each other. Messages that
// arrive are queued per peer.
// A link the peer closed or reset is only marked broken: the error a
// caller sees comes from the job's health (which names how the peer was
// lost) or from its deadline.
//
// Thread-safety: one thread at a time (the transport's contract).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hpu/comm/job_token.h"
#include "hpu/comm/transport.h"
#include "../zmq/net.h"

namespace hpu::comm::detail {

class TcpLink;
class FramePool;

struct TcpLinkOptions {
  int rank = 0;
  int size = 0;
  JobToken::Key key{};           // the job's data link key (JobKeys::dataLink)
  bool encrypt = false;          // secretstreams over the links
  std::size_t maxMessageBytes;   // longest message a peer may send
};

class TcpLinks {
 public:
  using Clock = Transport::Clock;
  using Deadline = Transport::Deadline;
  // Throws what the caller's wait must end with (the job's health, an abort).
  using Check = std::function<void()>;

  // Listens on `local`, any free port. Throws RendezvousError if it cannot.
  TcpLinks(const ResolvedAddress& local, TcpLinkOptions options);
  ~TcpLinks();
  TcpLinks(const TcpLinks&) = delete;
  TcpLinks& operator=(const TcpLinks&) = delete;

  // "tcp://10.0.0.2:41234" (IPv6: "tcp://[::1]:41234"), and its port.
  const std::string& endpoint() const { return endpoint_; }
  std::uint16_t port() const { return port_; }

  // Sets up a link to every rank of `peers` (global rank and endpoint).
  // Throws RendezvousError naming the ranks whose link is not up at
  // `deadline`, or a peer that failed the handshake; `check` runs between
  // waits. REQUIRES: called once, with the same pairs on both ends.
  void connect(const std::vector<std::pair<int, std::string>>& peers, Deadline deadline, const Check& check);
  bool linked(int peer) const;

  // Writes `header` then `payload` as one message to `peer` (see Flow).
  // Throws CommTimeoutError at `deadline`; `check` runs between waits.
  // REQUIRES: linked(peer).
  void send(int peer, std::span<const std::byte> header, std::span<const std::byte> payload, Deadline deadline,
            const Check& check);
  // Queues `header` (copied) then `payload` as one message to `peer`, writes
  // what the link takes now and returns; the rest is written while this
  // rank waits in send, flush or progress. `payload` must stay unchanged
  // until flush() returns or ownPosted() is called.
  // REQUIRES: linked(peer).
  void post(int peer, std::span<const std::byte> header, std::span<const std::byte> payload);
  // Returns once every queued message is in the kernel's buffers; throws as send.
  void flush(Deadline deadline, const Check& check);
  // Copies what queued messages still read of their callers' memory.
  void ownPosted();
  // The next message from `peer` if it has arrived whole, read without
  // waiting: with no queued message to write, from that link alone (one
  // read finds a message that is there, where a poll and the read did),
  // and no further than a message read into its place (expect), which
  // saves the read that finds the socket empty; else as progress(0), which
  // writes too. Measured, 4 ranks on 2 cores: reading on past placed
  // messages made 1-16 MiB alltoalls 1.1-1.2x slower; stopping after
  // unplaced ones too (a ring's) made 1 MiB allreduces 1.35x slower.
  std::unique_ptr<Message> tryTake(int peer);
  // Transport::expect for a linked peer: the frame of the next message not
  // described yet is read into `destination` past its header if it has that
  // size and has not begun to arrive, and the link is not encrypted.
  void expect(int peer, std::size_t headerBytes, std::span<std::byte> destination);
  // Transport::forgetExpectations, on every link.
  void forgetExpectations();
  // Reads what has arrived on every link, waiting up to `wait` for
  // something to (zero: only what is there).
  void progress(std::chrono::microseconds wait);
  // Whether the link to `peer` was closed or reset by the other end, or broke.
  bool broken(int peer) const;

 private:
  TcpLink* link(int peer) const;
  // Reads every readable link and writes every writable one with queued
  // messages, or waits for one to be up to `wait`.
  void pollLinks(std::chrono::microseconds wait);
  // Writes `l`'s queued messages (reading every link while it waits);
  // throws CommTimeoutError at `deadline`, and what `check` throws.
  void writeAll(TcpLink* l, Deadline deadline, const Check& check);
  // Once `l` took its messages: if it broke instead, waits for `check` to
  // say why, or throws CommTimeoutError at `deadline`.
  void awaitReport(TcpLink* l, Deadline deadline, const Check& check);

  TcpLinkOptions options_;
  int listener_ = -1;
  std::string endpoint_;
  std::uint16_t port_ = 0;
  std::shared_ptr<FramePool> pool_;               // message buffers, reused
  std::vector<std::unique_ptr<TcpLink>> links_;  // per global rank; null: same node, or self
};

}  // namespace hpu::comm::detail
