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
constexpr milliseconds kPollSlice{100};
constexpr int kDataHighWaterMark = 16384;
// A message holds at most one chunk plus its header and a barrier name.
constexpr std::int64_t kMaxDataMessage = static_cast<std::int64_t>(kMaxMessagePayload + kHeaderBytes + 65536);

class ZmqMessage final : public Message {
 public:
  explicit ZmqMessage(zmq::message_t message) : message_(std::move(message)) {}
  std::span<const std::byte> bytes() const override {
    return {static_cast<const std::byte*>(message_.data()) + kSenderBytes, message_.size() - kSenderBytes};
  }

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
      pending_(static_cast<std::size_t>(size)) {
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
  zmq::message_t message(kSenderBytes + header.size() + payload.size());
  auto* out = static_cast<std::byte*>(message.data());
  const auto sender = static_cast<std::uint32_t>(rank_);
  std::memcpy(out, &sender, kSenderBytes);
  std::memcpy(out + kSenderBytes, header.data(), header.size());
  if (!payload.empty()) std::memcpy(out + kSenderBytes + header.size(), payload.data(), payload.size());
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

std::unique_ptr<Message> ZmqTransport::recv(int peer, Deadline deadline) {
  HPU_COMM_CHECK(peer >= 0 && peer < size_ && peer != rank_, "recv from an invalid peer");
  auto& queue = pending_[static_cast<std::size_t>(peer)];
  const auto& health = *session_->health();
  for (;;) {
    if (queue.empty()) drainInbound();
    if (!queue.empty()) {
      auto message = std::make_unique<ZmqMessage>(std::move(queue.front()));
      queue.pop_front();
      return message;
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
