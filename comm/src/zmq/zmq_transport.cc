#include "zmq_transport.h"

#include <sched.h>
#include <sodium.h>

#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "../check.h"
#include "../collectives/context.h"
#include "../collectives/descriptor.h"
#include "hpu/comm/errors.h"

namespace hpu::comm::detail {
namespace {

using std::chrono::milliseconds;
// Every socket message starts with the sender's rank and the message's
// sequence number on its link (shm_lane.h: the order across both ways).
constexpr std::size_t kPrefixBytes = 2 * sizeof(std::uint32_t);
// Set in the sender word of a lane's announcement (its name follows; it has
// no sequence number).
constexpr std::uint32_t kLaneAnnounceFlag = 0x80000000u;
constexpr milliseconds kPollSlice{100};
// How long a receive spins (yielding the core) before it sleeps: being woken
// by the kernel costs more than a small message's whole trip (4-byte
// allreduce between two nodes 27 -> 7 us; the first 50 us of every wait
// are busy).
constexpr std::chrono::microseconds kSpin{50};
// A receive that finds its message there returns without yielding, so a
// rank could take a whole collective's messages before its co-scheduled
// peers run; every this many bytes received it yields the core. 4 ranks on
// 2 cores over TCP, alltoall of 4-64 MiB: 512 KiB-1 MiB 0.7-0.8x Open MPI's
// time; 2 MiB 1.0x, never yielding 1.1-1.2x; below 512 KiB the same.
constexpr std::size_t kYieldAfterBytes = 512 << 10;
// How long a clean close waits for peers still reading what was sent over
// the sockets. Lanes not opened yet are waited for longer (~ZmqTransport).
constexpr milliseconds kLinger{2000};
// After a failure: how long a closing sender still waits for a peer to open
// its lane. The lane may hold what the peer needs to name the failure (a
// collective's descriptor), and a peer that is alive opens it in
// milliseconds; a dead one costs this much of the exit.
constexpr milliseconds kFailedLinger{500};
constexpr int kDataHighWaterMark = 16384;
// A message holds at most one chunk plus its header and a barrier name.
constexpr std::int64_t kMaxDataMessage = static_cast<std::int64_t>(kMaxMessagePayload + kHeaderBytes + 65536);

std::span<const std::byte> afterPrefix(const zmq::message_t& message) {
  return {static_cast<const std::byte*>(message.data()) + kPrefixBytes, message.size() - kPrefixBytes};
}

std::uint32_t prefixWord(const zmq::message_t& message, std::size_t index) {
  std::uint32_t word = 0;
  std::memcpy(&word, static_cast<const std::byte*>(message.data()) + index * sizeof word, sizeof word);
  return word;
}

class ZmqMessage final : public Message {
 public:
  explicit ZmqMessage(zmq::message_t message) : message_(std::move(message)) {}
  std::span<const std::byte> bytes() const override { return afterPrefix(message_); }

 private:
  zmq::message_t message_;
};

milliseconds sliceUntil(Transport::Deadline deadline) {
  const auto left = std::chrono::ceil<milliseconds>(deadline - Transport::Clock::now());
  return std::clamp(left, milliseconds(1), kPollSlice);
}

// A rank's inbound socket, in Linux's abstract namespace: named by its
// process, a random nonce (a local process cannot predict the name and bind
// it first) and its rank.
std::string ipcEndpoint(std::uint32_t pid, std::uint64_t nonce, int rank) {
  return fmt::format("ipc://@hpu-train-{}-{:016x}-r{}", pid, nonce, rank);
}

ResolvedAddress tcpAddress(const std::string& numericHost) {
  return ResolvedAddress{.ip = numericHost, .ipv6 = numericHost.find(':') != std::string::npos};
}

}  // namespace

ZmqTransport::ZmqTransport(std::shared_ptr<ZmqSession> session, int rank, int size,
                           const ResolvedAddress& localAddress)
    : session_(std::move(session)),
      rank_(rank),
      size_(size),
      inbound_(makeSocket(session_->context(), zmq::socket_type::pull,
                          SocketLimits{.lingerMs = 0,
                                       .maxMessageBytes = kMaxDataMessage,
                                       .highWaterMark = kDataHighWaterMark,
                                       .ipv6 = localAddress.ipv6})),
      outbound_(static_cast<std::size_t>(size)),
      pending_(static_cast<std::size_t>(size)),
      nodeOf_(static_cast<std::size_t>(size)),
      sameNode_(static_cast<std::size_t>(size), false),
      linked_(static_cast<std::size_t>(size), false),
      tcp_(std::make_unique<TcpLinks>(localAddress, TcpLinkOptions{.rank = rank,
                                                                   .size = size,
                                                                   .key = session_->keys().dataLink,
                                                                   .encrypt = session_->dataSecurity() == Security::kCurve,
                                                                   .maxMessageBytes = kMaxDataMessage})),
      lanesOut_(static_cast<std::size_t>(size)),
      lanesIn_(static_cast<std::size_t>(size)),
      sendSequence_(static_cast<std::size_t>(size), 0),
      recvSequence_(static_cast<std::size_t>(size), 0),
      sendBuffers_(std::make_shared<SendBufferPool>()) {
  secureServer(inbound_, session_->dataSecurity(), session_->keys(), "hpu-data");
  endpoints_.tcpHost = localAddress.ip;
  endpoints_.tcpPort = tcp_->port();
  endpoints_.ipcPid = static_cast<std::uint32_t>(::getpid());
  randombytes_buf(&endpoints_.ipcNonce, sizeof endpoints_.ipcNonce);
  inbound_.bind(ipcEndpoint(endpoints_.ipcPid, endpoints_.ipcNonce, rank));
}

ZmqTransport::~ZmqTransport() {
  // After a failure the peers are not reading: drop what is queued instead
  // of lingering on it.
  const bool failed = aborted_ || dropped_ || session_->health()->firstFailure().has_value();
  // A peer still reading needs the lanes it has not opened yet (after a
  // failure too: they may hold what it needs to name the failure). After a
  // clean run a peer that lives opens them, however slowly (256 ranks on 2
  // cores: seconds), or is declared lost within the peer timeout, or leaves.
  const auto& health = session_->health();
  const auto deadline =
      std::chrono::steady_clock::now() + (failed ? kFailedLinger : session_->options().settings.peerTimeout + kLinger);
  for (std::size_t peer = 0; peer < lanesOut_.size(); ++peer) {
    if (!lanesOut_[peer]) continue;
    lanesOut_[peer]->awaitReceiver(deadline, [&] {
      return health->firstFailure().has_value() || health->hasLeft(static_cast<int>(peer));
    });
  }
  for (auto& socket : outbound_) {
    if (!socket) continue;
    if (failed) socket->set(zmq::sockopt::linger, 0);
    socket->close();
  }
  inbound_.close();
}

void ZmqTransport::connectPeers(const PeerTable& peers, Deadline deadline) {
  HPU_COMM_CHECK(peers.ranks.size() == static_cast<std::size_t>(size_), "the peer table must list every rank");
  const PeerNode& me = peers.nodeOf(static_cast<std::size_t>(rank_));
  std::map<std::pair<std::string_view, std::uint32_t>, int> nodes;
  for (std::size_t r = 0; r < peers.ranks.size(); ++r) {
    const PeerNode& node = peers.nodeOf(r);
    nodeOf_[r] = nodes.emplace(std::pair(std::string_view(node.hostId), node.nodeRank), static_cast<int>(nodes.size()))
                     .first->second;
  }
  std::vector<std::pair<int, std::string>> remote;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    const PeerEntry& entry = peers.ranks[static_cast<std::size_t>(peer)];
    const PeerNode& node = peers.nodes[entry.node];
    const bool sameNode = node.hostId == me.hostId && node.nodeRank == me.nodeRank;
    sameNode_[static_cast<std::size_t>(peer)] = sameNode;
    linked_[static_cast<std::size_t>(peer)] = !sameNode;
    if (!sameNode) {
      remote.emplace_back(peer, tcpEndpoint(tcpAddress(node.tcpHost), entry.tcpPort));
      continue;
    }
    // Data must outlive a clean close: linger long enough to deliver the
    // last chunks to a peer that is still reading them.
    auto& socket = outbound_[static_cast<std::size_t>(peer)];
    socket.emplace(makeSocket(session_->context(), zmq::socket_type::push,
                              SocketLimits{.lingerMs = static_cast<int>(kLinger.count()),
                                           .maxMessageBytes = 1024,
                                           .highWaterMark = kDataHighWaterMark,
                                           .ipv6 = tcpAddress(node.tcpHost).ipv6}));
    secureClient(*socket, session_->dataSecurity(), session_->keys());
    socket->connect(ipcEndpoint(entry.ipcPid, entry.ipcNonce, peer));
  }
  anyLink_ = !remote.empty();
  tcp_->connect(remote, deadline, [this] { checkHealth(); });
}

void ZmqTransport::send(int peer, std::span<const std::byte> header, std::span<const std::byte> payload,
                        Deadline deadline) {
  HPU_COMM_CHECK(peer >= 0 && peer < size_ && peer != rank_, "send to an invalid peer");
  checkNotAborted();
  session_->health()->check();
  if (dropped_.load(std::memory_order_relaxed)) return;
  if (linked_[static_cast<std::size_t>(peer)]) {
    tcp_->send(peer, header, payload, deadline, [this] { checkHealth(); });
    return;
  }
  const std::uint32_t sequence = sendSequence_[static_cast<std::size_t>(peer)]++;
  ShmSender* lane = laneTo(peer, deadline);
  const bool fits = ShmSender::fits(header.size() + payload.size());
  if (!lane || !fits || !lane->tryPut(sequence, header, payload))
    sendOverSocket(peer, static_cast<std::uint32_t>(rank_), sequence, header, payload, deadline);
  if (lane) lane->segment().posted(sequence);
}

bool ZmqTransport::post(int peer, std::span<const std::byte> header, std::span<const std::byte> payload,
                        Deadline deadline) {
  HPU_COMM_CHECK(peer >= 0 && peer < size_ && peer != rank_, "send to an invalid peer");
  if (!linked_[static_cast<std::size_t>(peer)]) {
    send(peer, header, payload, deadline);
    return false;
  }
  checkNotAborted();
  session_->health()->check();
  if (dropped_.load(std::memory_order_relaxed)) return false;
  tcp_->post(peer, header, payload);
  return true;
}

void ZmqTransport::flushSends(Deadline deadline) {
  if (tcp_ && !dropped_.load(std::memory_order_relaxed)) tcp_->flush(deadline, [this] { checkHealth(); });
}

void ZmqTransport::ownPosted() {
  if (tcp_) tcp_->ownPosted();
}

void ZmqTransport::sendOverSocket(int peer, std::uint32_t senderWord, std::uint32_t sequence,
                                  std::span<const std::byte> header, std::span<const std::byte> payload,
                                  Deadline deadline) {
  const std::size_t bytes = kPrefixBytes + header.size() + payload.size();
  std::optional<zmq::message_t> pooled = sendBuffers_->message(bytes);
  zmq::message_t message = pooled ? std::move(*pooled) : zmq::message_t(bytes);
  auto* out = static_cast<std::byte*>(message.data());
  std::memcpy(out, &senderWord, sizeof senderWord);
  std::memcpy(out + sizeof senderWord, &sequence, sizeof sequence);
  if (!header.empty()) std::memcpy(out + kPrefixBytes, header.data(), header.size());
  if (!payload.empty()) std::memcpy(out + kPrefixBytes + header.size(), payload.data(), payload.size());
  auto& socket = *outbound_[static_cast<std::size_t>(peer)];
  const auto& health = *session_->health();
  for (;;) {
    if (socket.send(message, zmq::send_flags::dontwait)) return;
    checkNotAborted();
    health.check();
    if (Clock::now() >= deadline) {
      throw CommTimeoutError(fmt::format("rank {} did not take its messages before the deadline", peer));
    }
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLOUT, 0};
    zmq::poll(&item, 1, sliceUntil(deadline));
  }
}

ShmSender* ZmqTransport::laneTo(int peer, Deadline deadline) {
  const auto p = static_cast<std::size_t>(peer);
  if (!sameNode_[p]) return nullptr;
  if (!lanesOut_[p]) {
    lanesOut_[p] = ShmSender::create(rank_, peer);
    if (!lanesOut_[p]) {
      sameNode_[p] = false;  // no shared memory: the socket from now on
      return nullptr;
    }
    const std::string& name = lanesOut_[p]->segment().name();
    sendOverSocket(peer, static_cast<std::uint32_t>(rank_) | kLaneAnnounceFlag, 0, {},
                   std::as_bytes(std::span<const char>(name)), deadline);
  }
  return lanesOut_[p].get();
}

void ZmqTransport::yieldCore() {
  sched_yield();
  takenSinceYield_ = 0;
}

std::unique_ptr<Message> ZmqTransport::recvOverLink(int peer, Deadline deadline) {
  const auto& health = *session_->health();
  // A message that comes within kSpin is read without sleeping.
  const auto spinUntil = Clock::now() + kSpin;
  while (!dropped_.load(std::memory_order_relaxed) && Clock::now() < spinUntil) {
    if (auto message = tcp_->tryTake(peer)) {
      takenSinceYield_ += message->bytes().size() + (message->placedPayload() ? message->placedPayload()->size() : 0);
      if (takenSinceYield_ >= kYieldAfterBytes) yieldCore();
      return message;
    }
    tcp_->progress(std::chrono::microseconds(0));
    if (tcp_->broken(peer) || aborted_.load(std::memory_order_relaxed)) break;
    // More ranks than cores: the rank that sends may be waiting for this core.
    yieldCore();
  }
  takenSinceYield_ = 0;  // this rank sleeps or fails below
  for (;;) {
    checkNotAborted();
    const bool dropped = dropped_.load(std::memory_order_relaxed);
    if (!dropped) {
      if (auto message = tcp_->tryTake(peer)) return message;
    }
    health.check(peer);
    if (Clock::now() >= deadline) {
      throw CommTimeoutError(
          tcp_->broken(peer)
              ? fmt::format("no message from rank {} before the deadline; its data link broke", peer)
              : fmt::format("no message from rank {} before the deadline", peer));
    }
    if (dropped || tcp_->broken(peer))
      std::this_thread::sleep_for(std::min(sliceUntil(deadline), milliseconds(10)));
    else
      tcp_->progress(sliceUntil(deadline));
  }
}

void ZmqTransport::expect(int peer, std::size_t headerBytes, std::span<std::byte> destination) {
  HPU_COMM_CHECK(peer >= 0 && peer < size_ && peer != rank_, "expect from an invalid peer");
  if (linked_[static_cast<std::size_t>(peer)]) tcp_->expect(peer, headerBytes, destination);
}

void ZmqTransport::forgetExpectations() {
  if (tcp_) tcp_->forgetExpectations();
}

std::unique_ptr<Message> ZmqTransport::recv(int peer, Deadline deadline) {
  HPU_COMM_CHECK(peer >= 0 && peer < size_ && peer != rank_, "recv from an invalid peer");
  const auto p = static_cast<std::size_t>(peer);
  if (linked_[p]) return recvOverLink(peer, deadline);
  const auto& health = *session_->health();
  // As between nodes (recvOverLink): a message that comes within kSpin is
  // taken without sleeping on the lane's futex.
  const auto spinUntil = Clock::now() + kSpin;
  while (!dropped_.load(std::memory_order_relaxed) && !aborted_.load(std::memory_order_acquire) &&
         Clock::now() < spinUntil) {
    if (auto message = takeNext(peer)) return message;
    if (!lanesIn_[p] || lanesIn_[p]->segment().wasPosted(recvSequence_[p])) {  // on the socket
      drainInbound();
      if (auto message = takeNext(peer)) return message;
    }
    sched_yield();
  }
  for (;;) {
    // An aborted rank delivers nothing more, even messages already here: its
    // collective in flight fails with the abort, not with what a peer sent
    // after learning of it.
    checkNotAborted();
    // Read before looking: a message posted then and not in the lane now is
    // on the socket (posting follows putting it in a slot).
    const bool dropped = dropped_.load(std::memory_order_relaxed);
    const bool posted = lanesIn_[p] && lanesIn_[p]->segment().wasPosted(recvSequence_[p]);
    if (!dropped) {
      if (auto message = takeNext(peer)) return message;
      drainInbound();
      if (auto message = takeNext(peer)) return message;
    }
    health.check(peer);
    if (Clock::now() >= deadline) {
      throw CommTimeoutError(fmt::format("no message from rank {} before the deadline", peer));
    }
    // With links to other nodes, wake every millisecond to read them.
    const milliseconds slice = anyLink_ ? std::min(sliceUntil(deadline), milliseconds(1)) : sliceUntil(deadline);
    if (anyLink_ && !dropped) tcp_->progress(std::chrono::microseconds(0));
    if (dropped) {
      std::this_thread::sleep_for(slice);
    } else if (lanesIn_[p] && !posted) {
      lanesIn_[p]->segment().waitForPost(recvSequence_[p], slice);  // at once if posted since
    } else {
      zmq::pollitem_t item{inbound_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, slice);
    }
  }
}

std::unique_ptr<Message> ZmqTransport::takeNext(int peer) {
  const auto p = static_cast<std::size_t>(peer);
  std::unique_ptr<Message> message;
  if (lanesIn_[p]) message = lanesIn_[p]->tryTake(recvSequence_[p]);
  auto& queue = pending_[p];
  if (!message && !queue.empty() && prefixWord(queue.front(), 1) == recvSequence_[p]) {
    message = std::make_unique<ZmqMessage>(std::move(queue.front()));
    queue.pop_front();
  }
  if (message) ++recvSequence_[p];
  return message;
}

void ZmqTransport::drainInbound() {
  for (;;) {
    zmq::message_t message;
    if (!inbound_.recv(message, zmq::recv_flags::dontwait)) return;
    const std::uint32_t word = message.size() >= kPrefixBytes ? prefixWord(message, 0) : 0;
    const std::uint32_t sender = word & ~kLaneAnnounceFlag;
    if (message.size() < kPrefixBytes || sender >= static_cast<std::uint32_t>(size_) ||
        sender == static_cast<std::uint32_t>(rank_)) {
      std::size_t suppressed = 0;
      if (limiter_.allow("data", suppressed)) {
        spdlog::warn("rank {}: dropped a malformed data message ({} bytes){}", rank_, message.size(),
                     suppressed ? fmt::format("; {} more since the last report", suppressed) : "");
      }
      continue;
    }
    if (word & kLaneAnnounceFlag) {
      const auto name = afterPrefix(message);
      lanesIn_[sender] = std::make_unique<ShmReceiver>(std::string(reinterpret_cast<const char*>(name.data()), name.size()));
      continue;
    }
    pending_[sender].push_back(std::move(message));
  }
}

void ZmqTransport::checkNotAborted() const {
  if (!aborted_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(abortMutex_);
  throw PeerLostError(rank_, abortReason_);
}

void ZmqTransport::abort(std::string_view reason) {
  {
    std::lock_guard lock(abortMutex_);
    if (aborted_) return;
    abortReason_ = fmt::format("rank {} aborted: {}", rank_, reason);
    aborted_.store(true, std::memory_order_release);
  }
  session_->client().abort(reason);
}

void ZmqTransport::checkHealth() const {
  checkNotAborted();
  session_->health()->check();
}

void ZmqTransport::setActivity(std::string_view activity) { session_->client().setActivity(activity); }

void ZmqTransport::dropConnectionsForTesting() {
  dropped_.store(true, std::memory_order_relaxed);
  session_->client().dropForTesting();
}

}  // namespace hpu::comm::detail
