#include "zmq_transport.h"

#include <sodium.h>

#include <cstring>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "../check.h"
#include "../collectives/context.h"
#include "../collectives/descriptor.h"
#include "hpu/comm/errors.h"

namespace hpu::comm::detail {
namespace {

using std::chrono::milliseconds;
constexpr std::size_t kSenderBytes = sizeof(std::uint32_t);
// Set in the sender prefix of a notice: the message is in a shared-memory
// lane (shm_lane.h), not in the notice.
constexpr std::uint32_t kShmNoticeFlag = 0x80000000u;
// Messages from this size on go to same-node peers through shared memory;
// below it the socket's copies cost less than the notice's round trip.
constexpr std::size_t kShmMinPayload = 16u << 10;
constexpr milliseconds kPollSlice{100};
constexpr int kDataHighWaterMark = 16384;
// A message holds at most one chunk plus its header and a barrier name.
constexpr std::int64_t kMaxDataMessage = static_cast<std::int64_t>(kMaxMessagePayload + kHeaderBytes + 65536);

std::span<const std::byte> afterSender(const zmq::message_t& message) {
  return {static_cast<const std::byte*>(message.data()) + kSenderBytes, message.size() - kSenderBytes};
}

class ZmqMessage final : public Message {
 public:
  explicit ZmqMessage(zmq::message_t message) : message_(std::move(message)) {}
  std::span<const std::byte> bytes() const override { return afterSender(message_); }

 private:
  zmq::message_t message_;
};

milliseconds sliceUntil(Transport::Deadline deadline) {
  const auto left = std::chrono::ceil<milliseconds>(deadline - Transport::Clock::now());
  return std::clamp(left, milliseconds(1), kPollSlice);
}

std::string ipcEndpoint(int rank) {
  std::array<unsigned char, 8> nonce{};
  randombytes_buf(nonce.data(), nonce.size());
  char hex[17] = {};
  sodium_bin2hex(hex, sizeof hex, nonce.data(), nonce.size());
  return fmt::format("ipc://@hpu-train-{}-{}-r{}", ::getpid(), hex, rank);
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
      sameNode_(static_cast<std::size_t>(size), false),
      lanesOut_(static_cast<std::size_t>(size)),
      lanesIn_(static_cast<std::size_t>(size)),
      sendBuffers_(std::make_shared<SendBufferPool>()) {
  secureServer(inbound_, session_->dataSecurity(), session_->keys(), "hpu-data");
  inbound_.bind(tcpEndpoint(localAddress, 0));
  endpoints_.tcp = inbound_.get(zmq::sockopt::last_endpoint);
  endpoints_.ipc = ipcEndpoint(rank);
  inbound_.bind(endpoints_.ipc);
}

ZmqTransport::~ZmqTransport() {
  // After a failure the peers are not reading: drop what is queued instead
  // of lingering on it.
  const bool failed = aborted_ || session_->health()->firstFailure().has_value();
  for (auto& socket : outbound_) {
    if (!socket) continue;
    if (failed) socket->set(zmq::sockopt::linger, 0);
    socket->close();
  }
  inbound_.close();
}

void ZmqTransport::connectPeers(const std::vector<PeerInfo>& peers) {
  HPU_COMM_CHECK(peers.size() == static_cast<std::size_t>(size_), "the peer table must list every rank");
  const PeerInfo& me = peers[static_cast<std::size_t>(rank_)];
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    const PeerInfo& info = peers[static_cast<std::size_t>(peer)];
    const bool sameNode = info.hostId == me.hostId && info.nodeRank == me.nodeRank;
    sameNode_[static_cast<std::size_t>(peer)] = sameNode;
    // Data must outlive a clean close: linger long enough to deliver the
    // last chunks to a peer that is still reading them.
    auto& socket = outbound_[static_cast<std::size_t>(peer)];
    socket.emplace(makeSocket(session_->context(), zmq::socket_type::push,
                              SocketLimits{.lingerMs = 2000,
                                           .maxMessageBytes = 1024,
                                           .highWaterMark = kDataHighWaterMark,
                                           .ipv6 = info.endpoints.tcp.find('[') != std::string::npos}));
    secureClient(*socket, session_->dataSecurity(), session_->keys());
    socket->connect(sameNode ? info.endpoints.ipc : info.endpoints.tcp);
  }
}

void ZmqTransport::send(int peer, std::span<const std::byte> header, std::span<const std::byte> payload,
                        Deadline deadline) {
  HPU_COMM_CHECK(peer >= 0 && peer < size_ && peer != rank_, "send to an invalid peer");
  const auto& health = *session_->health();
  checkNotAborted();
  health.check();
  auto sender = static_cast<std::uint32_t>(rank_);
  std::span<const std::byte> body = payload;
  std::string notice;
  if (ShmSender* lane = laneTo(peer, header.size() + payload.size())) {
    if (auto put = lane->tryPut(header, payload)) {
      notice = encodeNotice(*put);
      sender |= kShmNoticeFlag;
      header = {};
      body = std::as_bytes(std::span<const char>(notice));
    }
  }
  const std::size_t bytes = kSenderBytes + header.size() + body.size();
  std::optional<zmq::message_t> pooled = sendBuffers_->message(bytes);
  zmq::message_t message = pooled ? std::move(*pooled) : zmq::message_t(bytes);
  auto* out = static_cast<std::byte*>(message.data());
  std::memcpy(out, &sender, kSenderBytes);
  if (!header.empty()) std::memcpy(out + kSenderBytes, header.data(), header.size());
  if (!body.empty()) std::memcpy(out + kSenderBytes + header.size(), body.data(), body.size());
  auto& socket = *outbound_[static_cast<std::size_t>(peer)];
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

ShmSender* ZmqTransport::laneTo(int peer, std::size_t messageBytes) {
  const auto p = static_cast<std::size_t>(peer);
  if (!sameNode_[p] || messageBytes < kShmMinPayload || !ShmSender::fits(messageBytes)) return nullptr;
  if (!lanesOut_[p]) {
    lanesOut_[p] = ShmSender::create(rank_, peer);
    if (!lanesOut_[p]) sameNode_[p] = false;  // no shared memory: the socket from now on
  }
  return lanesOut_[p].get();
}

std::unique_ptr<Message> ZmqTransport::recv(int peer, Deadline deadline) {
  HPU_COMM_CHECK(peer >= 0 && peer < size_ && peer != rank_, "recv from an invalid peer");
  auto& queue = pending_[static_cast<std::size_t>(peer)];
  const auto& health = *session_->health();
  for (;;) {
    if (queue.empty()) drainInbound();
    if (!queue.empty()) {
      zmq::message_t front = std::move(queue.front());
      queue.pop_front();
      std::uint32_t sender = 0;
      std::memcpy(&sender, front.data(), kSenderBytes);
      if (sender & kShmNoticeFlag) return readFromLane(peer, front);
      return std::make_unique<ZmqMessage>(std::move(front));
    }
    checkNotAborted();
    health.check(peer);
    if (Clock::now() >= deadline) {
      throw CommTimeoutError(fmt::format("no message from rank {} before the deadline", peer));
    }
    zmq::pollitem_t item{inbound_.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, sliceUntil(deadline));
  }
}

void ZmqTransport::drainInbound() {
  for (;;) {
    zmq::message_t message;
    if (!inbound_.recv(message, zmq::recv_flags::dontwait)) return;
    std::uint32_t sender = 0;
    if (message.size() >= kSenderBytes) std::memcpy(&sender, message.data(), kSenderBytes);
    sender &= ~kShmNoticeFlag;
    if (message.size() < kSenderBytes || sender >= static_cast<std::uint32_t>(size_) ||
        sender == static_cast<std::uint32_t>(rank_)) {
      std::size_t suppressed = 0;
      if (limiter_.allow("data", suppressed)) {
        spdlog::warn("rank {}: dropped a malformed data message ({} bytes){}", rank_, message.size(),
                     suppressed ? fmt::format("; {} more since the last report", suppressed) : "");
      }
      continue;
    }
    pending_[sender].push_back(std::move(message));
  }
}

std::unique_ptr<Message> ZmqTransport::readFromLane(int peer, const zmq::message_t& notice) {
  const auto decoded = decodeNotice(afterSender(notice));
  if (!decoded) throw CommError(fmt::format("rank {}: malformed shared-memory notice from rank {}", rank_, peer));
  auto& lane = lanesIn_[static_cast<std::size_t>(peer)];
  if (!lane || lane->name() != decoded->segment) lane = openShmSegment(decoded->segment);
  HPU_COMM_CHECK(lane->state(decoded->slot).load(std::memory_order_acquire) != 0,
                 "a shared-memory notice names a free slot");
  return std::make_unique<ShmMessage>(lane, decoded->slot, decoded->bytes);
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

void ZmqTransport::setActivity(std::string_view activity) { session_->client().setActivity(activity); }

}  // namespace hpu::comm::detail
