#include "tcp_links.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sodium.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "../check.h"
#include "../rank_list.h"
#include "hpu/comm/errors.h"
#include "link_handshake.h"

namespace hpu::comm::detail {

using std::chrono::microseconds;
using std::chrono::milliseconds;

namespace {

constexpr std::size_t kLengthBytes = 4;
// Received bytes are read through a staging buffer this large (many small
// frames in one read); the rest of a frame body once it is at least
// kDirectBytes long is read straight into its message, and the payload of
// an expected frame read with its length and header (one read, not two).
constexpr std::size_t kStageBytes = 64 << 10;
constexpr std::size_t kDirectBytes = 4 << 10;
constexpr std::size_t kStreamHeaderBytes = crypto_secretstream_xchacha20poly1305_HEADERBYTES;
constexpr std::size_t kTagBytes = crypto_secretstream_xchacha20poly1305_ABYTES;
constexpr milliseconds kPollSlice{100};
// How long an accepted connection may take to say hello before it is
// dropped (a stray connection must not hold up the others).
constexpr milliseconds kHelloPatience{5000};

// Bytes without zero-filling (a message body is overwritten whole).
struct Bytes {
  std::unique_ptr<std::byte[]> data;
  std::size_t size = 0;
  std::size_t capacity = 0;
  static Bytes of(std::size_t n) { return {std::unique_ptr<std::byte[]>(new std::byte[n]), n, n}; }
};

}  // namespace

// Message buffers, reused. A ring allreduce receives a chunk (256 KiB) per
// step and frees it a step later; glibc hands such blocks back to the kernel
// and faults them in again, which made a 1 MiB allreduce 4.8x slower. Holds
// at most kPooledBytes. Thread-safe: a message may be freed on another
// thread than the one that received it.
class FramePool {
 public:
  Bytes acquire(std::size_t n) {
    {
      std::lock_guard lock(mutex_);
      auto best = free_.end();
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if (it->capacity >= n && it->capacity <= 2 * n + 4096 && (best == free_.end() || it->capacity < best->capacity))
          best = it;
      if (best != free_.end()) {
        Bytes b = std::move(*best);
        free_.erase(best);
        pooled_ -= b.capacity;
        b.size = n;
        return b;
      }
    }
    return Bytes::of(n);
  }
  void release(Bytes b) {
    std::lock_guard lock(mutex_);
    if (b.data == nullptr || pooled_ + b.capacity > kPooledBytes) return;
    pooled_ += b.capacity;
    free_.push_back(std::move(b));
  }

 private:
  static constexpr std::size_t kPooledBytes = 64 << 20;
  std::mutex mutex_;
  std::vector<Bytes> free_;
  std::size_t pooled_ = 0;
};

namespace {

// A frame's message: its bytes, or its header with the payload placed in
// the receiver's memory (TcpLink::expect).
class TcpMessage final : public Message {
 public:
  TcpMessage(Bytes bytes, std::shared_ptr<FramePool> pool, std::optional<std::span<std::byte>> placed = std::nullopt)
      : bytes_(std::move(bytes)), pool_(std::move(pool)), placed_(placed) {}
  ~TcpMessage() override { pool_->release(std::move(bytes_)); }
  std::span<const std::byte> bytes() const override { return {bytes_.data.get(), bytes_.size}; }
  std::optional<std::span<const std::byte>> placedPayload() const override { return placed_; }

  // Copies a placed payload behind the header, so the message owns it.
  void ownPayload() {
    if (!placed_) return;
    Bytes whole = pool_->acquire(bytes_.size + placed_->size());
    std::memcpy(whole.data.get(), bytes_.data.get(), bytes_.size);
    std::memcpy(whole.data.get() + bytes_.size, placed_->data(), placed_->size());
    pool_->release(std::exchange(bytes_, std::move(whole)));
    placed_.reset();
  }

 private:
  Bytes bytes_;
  std::shared_ptr<FramePool> pool_;
  std::optional<std::span<std::byte>> placed_;
};

std::string errnoText() { return std::strerror(errno); }

timespec timespecOf(microseconds wait) {
  const auto us = std::max<std::int64_t>(0, wait.count());
  return {static_cast<time_t>(us / 1000000), static_cast<long>((us % 1000000) * 1000)};
}

microseconds sliceUntil(Transport::Deadline deadline) {
  const auto left = std::chrono::ceil<microseconds>(deadline - Transport::Clock::now());
  return std::clamp<microseconds>(left, microseconds(0), kPollSlice);
}

// "tcp://10.0.0.2:41234" or "tcp://[::1]:41234" as a socket address.
sockaddr_storage addressOf(const std::string& endpoint, socklen_t& length) {
  const std::string_view prefix = "tcp://";
  const std::size_t colon = endpoint.rfind(':');
  if (endpoint.rfind(prefix, 0) != 0 || colon == std::string::npos || colon < prefix.size())
    throw RendezvousError(fmt::format("the data endpoint '{}' is not tcp://host:port", endpoint));
  std::string host = endpoint.substr(prefix.size(), colon - prefix.size());
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port = endpoint.substr(colon + 1);
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr)
    throw RendezvousError(fmt::format("the data endpoint '{}' is not tcp://host:port", endpoint));
  sockaddr_storage address{};
  std::memcpy(&address, found->ai_addr, found->ai_addrlen);
  length = found->ai_addrlen;
  ::freeaddrinfo(found);
  return address;
}

// Waits until `fd` has one of `events`, or `deadline`; false then. `check`
// runs between slices.
bool waitFor(int fd, short events, Transport::Deadline deadline, const TcpLinks::Check& check) {
  for (;;) {
    pollfd p{fd, events, 0};
    const timespec ts = timespecOf(sliceUntil(deadline));
    if (::ppoll(&p, 1, &ts, nullptr) > 0) return true;
    check();
    if (Transport::Clock::now() >= deadline) return false;
  }
}

}  // namespace

// One connection: frames out and in, and the message queue of its peer.
class TcpLink {
  // Placement: frames are numbered from 0 as they begin, messages as take() returns them.
  struct Expectation {
    std::uint64_t frame;
    std::size_t headerBytes;
    std::span<std::byte> destination;
  };

 public:
  TcpLink(int fd, int peer, std::size_t max_message, std::shared_ptr<FramePool> pool)
      : fd_(fd), peer_(peer), max_message_(max_message), pool_(std::move(pool)) {
    stage_ = Bytes::of(kStageBytes);
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~TcpLink() { ::close(fd_); }
  TcpLink(const TcpLink&) = delete;
  TcpLink& operator=(const TcpLink&) = delete;

  int fd() const { return fd_; }
  int peer() const { return peer_; }
  // An accepted connection's rank, once its hello said it.
  void setPeer(int peer) { peer_ = peer; }
  bool broken() const { return !broken_reason_.empty(); }
  const std::string& brokenReason() const { return broken_reason_; }

  // --- handshake: whole writes and reads with a deadline ---
  void writeExactly(std::span<const std::byte> bytes, Transport::Deadline deadline, const TcpLinks::Check& check) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        bytes = bytes.subspan(static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && errno != EAGAIN && errno != EINTR)
        throw RendezvousError(fmt::format("the data link to rank {} failed during its handshake: {}", peer_, errnoText()));
      if (!waitFor(fd_, POLLOUT, deadline, check))
        throw RendezvousError(fmt::format("rank {} did not take its data link handshake in time", peer_));
    }
  }
  // False at the deadline; throws if the peer closes the connection.
  bool readExactly(std::span<std::byte> bytes, Transport::Deadline deadline, const TcpLinks::Check& check) {
    while (!bytes.empty()) {
      const ssize_t n = ::recv(fd_, bytes.data(), bytes.size(), MSG_DONTWAIT);
      if (n > 0) {
        bytes = bytes.subspan(static_cast<std::size_t>(n));
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EINTR))
        throw RendezvousError(fmt::format("rank {} closed its data link during the handshake{}", peer_,
                                          n == 0 ? "" : ": " + errnoText()));
      if (!waitFor(fd_, POLLIN, deadline, check)) return false;
    }
    return true;
  }

  // --- encryption: one secretstream per direction ---
  std::array<std::byte, kStreamHeaderBytes> startPush(const LinkStreamKey& key) {
    std::array<std::byte, kStreamHeaderBytes> header{};
    crypto_secretstream_xchacha20poly1305_init_push(&push_, reinterpret_cast<unsigned char*>(header.data()), key.data());
    encrypted_ = true;
    return header;
  }
  bool startPull(const LinkStreamKey& key, std::span<const std::byte> header) {
    return crypto_secretstream_xchacha20poly1305_init_pull(
               &pull_, reinterpret_cast<const unsigned char*>(header.data()), key.data()) == 0;
  }

  // --- messages out ---
  // Queues `header` (copied) + `payload` as the link's last frame to write
  // (plain: from `payload`, which must stay until written or owned()).
  void queue(std::span<const std::byte> header, std::span<const std::byte> payload) {
    out_.push_back({std::vector<std::byte>(header.begin(), header.end()), payload, {}});
    if (out_.size() == 1) beginFront();
  }
  bool hasOutput() const { return !out_.empty(); }
  // Whether the link broke with messages still to write (they were dropped).
  bool droppedOutput() const { return dropped_output_; }
  // Copies what queued frames still read of their callers' memory.
  void ownOutput() {
    for (std::size_t i = 0; i < out_.size(); ++i) {
      OutFrame& f = out_[i];
      if (!f.owned.empty() || f.payload.empty()) continue;
      if (i == 0 && !encrypted_) {
        iovec& rest = iov_[2];  // what of the payload is still to write
        const auto* from = static_cast<const std::byte*>(rest.iov_base);
        f.owned.assign(from, from + rest.iov_len);
        rest.iov_base = f.owned.data();
      } else if (i > 0) {
        f.owned.assign(f.payload.begin(), f.payload.end());
        f.payload = f.owned;
      }
    }
  }
  // Writes what the kernel takes of the queued frames; true once all are
  // written (or the link broke, which drops them).
  bool writeSome() {
    while (!out_.empty()) {
      if (broken()) {
        dropped_output_ = true;
        out_.clear();
        return true;
      }
      while (iov_at_ < iov_count_) {
        msghdr m{};
        m.msg_iov = iov_.data() + iov_at_;
        m.msg_iovlen = static_cast<std::size_t>(iov_count_ - iov_at_);
        const ssize_t n = ::sendmsg(fd_, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN) return false;
          breakWith(fmt::format("writing failed: {}", errnoText()));
          break;
        }
        advance(static_cast<std::size_t>(n));
      }
      if (broken()) continue;
      out_.pop_front();
      if (!out_.empty()) beginFront();
    }
    return true;
  }

  // --- messages in ---
  // Reads what the socket holds; true if it read anything. A read shorter
  // than asked for emptied the socket: what comes after is read on the next
  // call (the caller's poll still sees it), which saves a read per call.
  // With `untilPlaced`, stops too once a message whose payload was read
  // into its place waits for take().
  bool readAvailable(bool untilPlaced = false) {
    bool any = false;
    while (!broken() && !(untilPlaced && !ready_.empty() && ready_.back()->placedPayload())) {
      ssize_t n;
      std::size_t asked;
      if (in_body_ && frameLength() - body_at_ >= kDirectBytes) {
        const std::span<std::byte> space = frameSpace();
        asked = space.size();
        n = ::recv(fd_, space.data(), asked, MSG_DONTWAIT);
        if (n > 0) {
          body_at_ += static_cast<std::size_t>(n);
          if (body_at_ == frameLength()) finishFrame();
        }
      } else if (const Expectation* next = nextFrameExpected()) {
        // The length and header into the stage, the payload into its place: one read.
        const std::size_t head = kLengthBytes + next->headerBytes;
        const std::span<std::byte> place = next->destination;
        std::array<iovec, 2> iov{iovec{stage_.data.get(), head}, iovec{place.data(), place.size()}};
        msghdr m{};
        m.msg_iov = iov.data();
        m.msg_iovlen = iov.size();
        asked = head + place.size();
        n = ::recvmsg(fd_, &m, MSG_DONTWAIT);
        if (n > 0) {
          const auto got = static_cast<std::size_t>(n);
          parse({stage_.data.get(), std::min(got, head)});
          if (got > head) takeReadInPlace(place.first(got - head));
        }
      } else {
        asked = kStageBytes;
        n = ::recv(fd_, stage_.data.get(), asked, MSG_DONTWAIT);
        if (n > 0) parse({stage_.data.get(), static_cast<std::size_t>(n)});
      }
      if (n > 0) {
        any = true;
        if (static_cast<std::size_t>(n) < asked) break;
        continue;
      }
      if (n == 0) {
        breakWith("the other end closed the connection");
      } else if (errno == EINTR) {
        continue;
      } else if (errno != EAGAIN) {
        breakWith(fmt::format("reading failed: {}", errnoText()));
      }
      break;
    }
    return any;
  }
  std::unique_ptr<Message> take() {
    if (ready_.empty()) return nullptr;
    std::unique_ptr<Message> m = std::move(ready_.front());
    ready_.pop_front();
    ++taken_;
    return m;
  }

  // --- placement ---
  // The next message take() has not returned and no earlier call described
  // is read into `destination` past its `headerBytes` if its frame is that
  // long, is not encrypted and has not begun to arrive.
  void expect(std::size_t headerBytes, std::span<std::byte> destination) {
    next_expected_ = std::max(next_expected_, taken_);
    expected_.push_back({next_expected_++, headerBytes, destination});
  }
  // Drops the expectations; the frame being read and the messages not taken
  // yet get buffers of their own.
  void forgetExpectations() {
    expected_.clear();
    for (auto& message : ready_) message->ownPayload();
    if (!placed_) return;
    Bytes whole = pool_->acquire(frameLength());
    std::memcpy(whole.data.get(), body_.data.get(), std::min(body_at_, body_.size));
    if (body_at_ > body_.size) std::memcpy(whole.data.get() + body_.size, placed_->data(), body_at_ - body_.size);
    pool_->release(std::exchange(body_, std::move(whole)));
    placed_.reset();
  }

 private:
  // Makes the first queued frame the one to write (encrypted: seals it now).
  void beginFront() {
    const std::span<const std::byte> header = out_.front().header, payload = out_.front().payload;
    const std::size_t message = header.size() + payload.size();
    if (encrypted_) {
      plain_.resize(message);
      if (!header.empty()) std::memcpy(plain_.data(), header.data(), header.size());
      if (!payload.empty()) std::memcpy(plain_.data() + header.size(), payload.data(), payload.size());
      cipher_.resize(kLengthBytes + message + kTagBytes);
      putLength(cipher_.data(), message + kTagBytes);
      crypto_secretstream_xchacha20poly1305_push(&push_, reinterpret_cast<unsigned char*>(cipher_.data() + kLengthBytes),
                                                 nullptr, reinterpret_cast<const unsigned char*>(plain_.data()),
                                                 message, nullptr, 0, 0);
      iov_[0] = {cipher_.data(), cipher_.size()};
      iov_count_ = 1;
    } else {
      putLength(length_, message);
      iov_[0] = {length_, kLengthBytes};
      iov_[1] = {const_cast<std::byte*>(header.data()), header.size()};
      iov_[2] = {const_cast<std::byte*>(payload.data()), payload.size()};
      iov_count_ = 3;
    }
    iov_at_ = 0;
  }
  static void putLength(std::byte* out, std::size_t length) {
    const auto n = static_cast<std::uint32_t>(length);
    for (int i = 0; i < 4; ++i) out[i] = static_cast<std::byte>(n >> (8 * i));
  }

  void advance(std::size_t n) {
    while (n > 0 && iov_at_ < iov_count_) {
      iovec& v = iov_[static_cast<std::size_t>(iov_at_)];
      const std::size_t step = std::min(n, v.iov_len);
      v.iov_base = static_cast<std::byte*>(v.iov_base) + step;
      v.iov_len -= step;
      n -= step;
      if (v.iov_len == 0) ++iov_at_;
    }
    while (iov_at_ < iov_count_ && iov_[static_cast<std::size_t>(iov_at_)].iov_len == 0) ++iov_at_;
  }

  // Takes `bytes`, the next bytes of the stream: lengths, and frame bodies
  // into their buffers or places.
  void parse(std::span<const std::byte> bytes) {
    while (!bytes.empty() && !broken()) {
      if (!in_body_) {
        const std::size_t take = std::min(bytes.size(), kLengthBytes - length_at_);
        std::memcpy(length_in_ + length_at_, bytes.data(), take);
        length_at_ += take;
        bytes = bytes.subspan(take);
        if (length_at_ < kLengthBytes) return;
        length_at_ = 0;
        std::uint32_t length = 0;
        for (int i = 0; i < 4; ++i) length |= static_cast<std::uint32_t>(length_in_[i]) << (8 * i);
        const std::size_t limit = max_message_ + (encrypted_ ? kTagBytes : 0);
        if (length > limit || (encrypted_ && length < kTagBytes)) {
          breakWith(fmt::format("it sent a frame of {} bytes (the limit is {})", length, limit));
          return;
        }
        startFrame(length);
        if (length == 0) finishFrame();
        continue;
      }
      const std::span<std::byte> space = frameSpace();
      const std::size_t take = std::min(bytes.size(), space.size());
      std::memcpy(space.data(), bytes.data(), take);
      body_at_ += take;
      bytes = bytes.subspan(take);
      if (body_at_ == frameLength()) finishFrame();
    }
  }
  // `bytes` were read into the place expected for the frame whose length
  // and header parse() just took. That frame was placed there unless its
  // length differed (a mismatch its receiver reports): then they are the
  // stream's next bytes like any other.
  void takeReadInPlace(std::span<std::byte> bytes) {
    if (in_body_ && placed_ && body_at_ == body_.size && placed_->data() == bytes.data()) {
      body_at_ += bytes.size();
      if (body_at_ == frameLength()) finishFrame();
    } else {
      parse(bytes);
    }
  }

  // The frame of `length` bytes that begins: into the destination expected
  // for it, past its header, or into a buffer of its own.
  void startFrame(std::size_t length) {
    const std::uint64_t frame = frames_started_++;
    while (!expected_.empty() && expected_.front().frame < frame) expected_.pop_front();
    if (!encrypted_ && !expected_.empty() && expected_.front().frame == frame &&
        length == expected_.front().headerBytes + expected_.front().destination.size()) {
      body_ = pool_->acquire(expected_.front().headerBytes);
      placed_ = expected_.front().destination;
      expected_.pop_front();
    } else {
      body_ = pool_->acquire(length);
    }
    body_at_ = 0;
    in_body_ = true;
  }
  // The expectation of the frame that begins next, if nothing of that frame
  // has been read yet.
  const Expectation* nextFrameExpected() const {
    if (encrypted_ || in_body_ || length_at_ != 0 || expected_.empty() || expected_.front().frame != frames_started_)
      return nullptr;
    return &expected_.front();
  }
  std::size_t frameLength() const { return body_.size + (placed_ ? placed_->size() : 0); }
  // Where the frame's next bytes go, as far as they are contiguous.
  std::span<std::byte> frameSpace() {
    if (body_at_ < body_.size) return {body_.data.get() + body_at_, body_.size - body_at_};
    return placed_->subspan(body_at_ - body_.size);
  }

  void finishFrame() {
    in_body_ = false;
    if (!encrypted_) {
      ready_.push_back(std::make_unique<TcpMessage>(std::move(body_), pool_, std::exchange(placed_, std::nullopt)));
      return;
    }
    Bytes plain = pool_->acquire(body_.size - kTagBytes);
    unsigned long long plain_size = 0;
    unsigned char tag = 0;
    if (crypto_secretstream_xchacha20poly1305_pull(&pull_, reinterpret_cast<unsigned char*>(plain.data.get()),
                                                   &plain_size, &tag,
                                                   reinterpret_cast<const unsigned char*>(body_.data.get()),
                                                   body_.size, nullptr, 0) != 0) {
      breakWith("a message from it failed authentication");
      return;
    }
    pool_->release(std::move(body_));
    ready_.push_back(std::make_unique<TcpMessage>(std::move(plain), pool_));
  }

  void breakWith(std::string reason) {
    if (broken()) return;
    broken_reason_ = std::move(reason);
    spdlog::debug("the data link to rank {} broke: {}", peer_, broken_reason_);
  }

  const int fd_;
  int peer_;
  const std::size_t max_message_;
  const std::shared_ptr<FramePool> pool_;
  std::string broken_reason_;

  bool encrypted_ = false;
  crypto_secretstream_xchacha20poly1305_state push_{}, pull_{};

  // The frames to write; the first is being written.
  struct OutFrame {
    std::vector<std::byte> header;
    std::span<const std::byte> payload;  // the caller's, or `owned`
    std::vector<std::byte> owned;
  };
  std::deque<OutFrame> out_;
  bool dropped_output_ = false;
  std::array<iovec, 3> iov_{};
  int iov_count_ = 0, iov_at_ = 0;
  std::byte length_[kLengthBytes]{};
  std::vector<std::byte> plain_, cipher_;  // encrypted frames

  // The frame being read.
  Bytes stage_;
  bool in_body_ = false;
  std::byte length_in_[kLengthBytes]{};
  std::size_t length_at_ = 0;
  Bytes body_;  // the frame, or its header when the rest is placed
  std::optional<std::span<std::byte>> placed_;  // where the rest of the frame goes
  std::size_t body_at_ = 0;
  std::deque<std::unique_ptr<TcpMessage>> ready_;

  std::deque<Expectation> expected_;
  std::uint64_t frames_started_ = 0, taken_ = 0, next_expected_ = 0;
};

TcpLinks::TcpLinks(const ResolvedAddress& local, TcpLinkOptions options)
    : options_(std::move(options)), pool_(std::make_shared<FramePool>()), links_(static_cast<std::size_t>(options_.size)) {
  socklen_t length = 0;
  sockaddr_storage address = addressOf(tcpEndpoint(local, 1), length);
  if (address.ss_family == AF_INET6)
    reinterpret_cast<sockaddr_in6*>(&address)->sin6_port = 0;  // any free port
  else
    reinterpret_cast<sockaddr_in*>(&address)->sin_port = 0;
  listener_ = ::socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      ::listen(listener_, std::max(16, options_.size)) != 0) {
    const std::string reason = errnoText();
    if (listener_ >= 0) ::close(listener_);
    throw RendezvousError(fmt::format("rank {}: cannot listen for data links on {}: {}", options_.rank, local.ip, reason));
  }
  sockaddr_storage bound{};
  socklen_t bound_length = sizeof bound;
  ::getsockname(listener_, reinterpret_cast<sockaddr*>(&bound), &bound_length);
  const int port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                     : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  port_ = static_cast<std::uint16_t>(port);
  endpoint_ = tcpEndpoint(local, port);
}

TcpLinks::~TcpLinks() {
  links_.clear();
  ::close(listener_);
}

TcpLink* TcpLinks::link(int peer) const { return links_.at(static_cast<std::size_t>(peer)).get(); }
bool TcpLinks::linked(int peer) const { return link(peer) != nullptr; }
bool TcpLinks::broken(int peer) const { return link(peer) != nullptr && link(peer)->broken(); }

void TcpLinks::connect(const std::vector<std::pair<int, std::string>>& peers, Deadline deadline, const Check& check) {
  const int me = options_.rank;
  const auto meWord = static_cast<std::uint32_t>(me);
  const std::size_t proof_bytes = std::tuple_size_v<LinkProof>;
  const std::size_t stream_header = options_.encrypt ? kStreamHeaderBytes : 0;
  const auto missing = [&](const std::set<int>& ranks) {
    return RendezvousError(fmt::format("rank {}: no data link to rank{} {} before HPU_RENDEZVOUS_TIMEOUT", me,
                                       ranks.size() == 1 ? "" : "s", formatRankList({ranks.begin(), ranks.end()})));
  };

  // 1. Connect to every higher rank and say hello.
  struct Outgoing {
    int peer;
    std::unique_ptr<TcpLink> link;
    LinkHello hello;
  };
  std::vector<Outgoing> outgoing;
  std::set<int> lower;
  for (const auto& [peer, endpoint] : peers) {
    if (peer < me) {
      lower.insert(peer);
      continue;
    }
    socklen_t length = 0;
    const sockaddr_storage address = addressOf(endpoint, length);
    std::unique_ptr<TcpLink> link;
    for (;;) {
      const int fd = ::socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0) throw RendezvousError(fmt::format("rank {}: cannot open a socket: {}", me, errnoText()));
      link = std::make_unique<TcpLink>(fd, peer, options_.maxMessageBytes, pool_);
      int error = 0;
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), length) != 0) {
        error = errno;
        if (error == EINPROGRESS && waitFor(fd, POLLOUT, deadline, check)) {
          socklen_t size = sizeof error;
          ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
        }
      }
      if (error == 0) break;
      if (Clock::now() >= deadline)
        throw RendezvousError(fmt::format("rank {}: cannot reach rank {} at {}: {}", me, peer, endpoint,
                                          error == EINPROGRESS ? "timed out" : std::strerror(error)));
      check();
      std::this_thread::sleep_for(milliseconds(10));
    }
    const LinkHello hello = makeLinkHello(meWord, static_cast<std::uint32_t>(peer));
    link->writeExactly(encodeLinkHello(hello), deadline, check);
    outgoing.push_back({peer, std::move(link), hello});
  }

  // 2. Accept every lower rank: check its hello, answer with ours and our proof.
  struct Incoming {
    std::unique_ptr<TcpLink> link;
    LinkSecrets secrets;
  };
  std::map<int, Incoming> incoming;
  std::set<int> waiting = lower;
  while (!waiting.empty()) {
    if (!waitFor(listener_, POLLIN, deadline, check)) throw missing(waiting);
    const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) continue;
    auto link = std::make_unique<TcpLink>(fd, -1, options_.maxMessageBytes, pool_);
    std::array<std::byte, kLinkHelloBytes> bytes{};
    std::optional<LinkHello> hello;
    try {
      if (link->readExactly(bytes, std::min(deadline, Clock::now() + kHelloPatience), check))
        hello = decodeLinkHello(bytes);
    } catch (const RendezvousError&) {
    }
    if (!hello || hello->to != meWord || !waiting.count(static_cast<int>(hello->from))) {
      spdlog::warn("rank {}: dropped a data connection that is not one of this job's ranks", me);
      continue;
    }
    const int peer = static_cast<int>(hello->from);
    link->setPeer(peer);
    const LinkHello mine = makeLinkHello(meWord, hello->from);
    Incoming in{std::move(link), deriveLinkSecrets(options_.key, *hello, mine)};
    std::vector<std::byte> answer(kLinkHelloBytes + proof_bytes);
    const auto encoded = encodeLinkHello(mine);
    std::copy(encoded.begin(), encoded.end(), answer.begin());
    std::copy(in.secrets.acceptor_proof.begin(), in.secrets.acceptor_proof.end(), answer.begin() + kLinkHelloBytes);
    if (options_.encrypt) {
      const auto header = in.link->startPush(in.secrets.acceptor_to_connector);
      answer.insert(answer.end(), header.begin(), header.end());
    }
    in.link->writeExactly(answer, deadline, check);
    incoming.emplace(peer, std::move(in));
    waiting.erase(peer);
  }

  // 3. Finish the links we opened: check the peer's proof, send ours.
  for (Outgoing& o : outgoing) {
    std::vector<std::byte> bytes(kLinkHelloBytes + proof_bytes + stream_header);
    if (!o.link->readExactly(bytes, deadline, check)) throw missing({o.peer});
    const std::optional<LinkHello> hello = decodeLinkHello(std::span(bytes).first(kLinkHelloBytes));
    if (!hello || hello->from != static_cast<std::uint32_t>(o.peer) || hello->to != meWord)
      throw RendezvousError(fmt::format("rank {}: the data endpoint of rank {} answered as another program or rank", me,
                                        o.peer));
    const LinkSecrets secrets = deriveLinkSecrets(options_.key, o.hello, *hello);
    LinkProof proof{};
    std::copy_n(bytes.begin() + kLinkHelloBytes, proof_bytes, proof.begin());
    if (!sameProof(proof, secrets.acceptor_proof))
      throw RendezvousError(fmt::format("rank {}: rank {} failed the data link handshake: it does not hold this job's "
                                        "token (HPU_JOB_TOKEN)",
                                        me, o.peer));
    if (options_.encrypt &&
        !o.link->startPull(secrets.acceptor_to_connector, std::span(bytes).subspan(kLinkHelloBytes + proof_bytes)))
      throw RendezvousError(fmt::format("rank {}: rank {} sent a bad stream header", me, o.peer));
    std::vector<std::byte> answer(secrets.connector_proof.begin(), secrets.connector_proof.end());
    if (options_.encrypt) {
      const auto header = o.link->startPush(secrets.connector_to_acceptor);
      answer.insert(answer.end(), header.begin(), header.end());
    }
    o.link->writeExactly(answer, deadline, check);
    links_[static_cast<std::size_t>(o.peer)] = std::move(o.link);
  }

  // 4. Finish the links we accepted.
  for (auto& [peer, in] : incoming) {
    std::vector<std::byte> bytes(proof_bytes + stream_header);
    if (!in.link->readExactly(bytes, deadline, check)) throw missing({peer});
    LinkProof proof{};
    std::copy_n(bytes.begin(), proof_bytes, proof.begin());
    if (!sameProof(proof, in.secrets.connector_proof))
      throw RendezvousError(fmt::format("rank {}: rank {} failed the data link handshake: it does not hold this job's "
                                        "token (HPU_JOB_TOKEN)",
                                        me, peer));
    if (options_.encrypt && !in.link->startPull(in.secrets.connector_to_acceptor, std::span(bytes).subspan(proof_bytes)))
      throw RendezvousError(fmt::format("rank {}: rank {} sent a bad stream header", me, peer));
    links_[static_cast<std::size_t>(peer)] = std::move(in.link);
  }
}

void TcpLinks::send(int peer, std::span<const std::byte> header, std::span<const std::byte> payload, Deadline deadline,
                    const Check& check) {
  TcpLink* l = link(peer);
  HPU_COMM_CHECK(l != nullptr, "send over a data link that does not exist");
  l->queue(header, payload);
  writeAll(l, deadline, check);
  awaitReport(l, deadline, check);
}

void TcpLinks::post(int peer, std::span<const std::byte> header, std::span<const std::byte> payload) {
  TcpLink* l = link(peer);
  HPU_COMM_CHECK(l != nullptr, "send over a data link that does not exist");
  l->queue(header, payload);
  l->writeSome();
}

void TcpLinks::flush(Deadline deadline, const Check& check) {
  for (const auto& l : links_) {
    if (!l) continue;
    writeAll(l.get(), deadline, check);
    // A link that broke after taking all of its messages fails nothing here.
    if (l->droppedOutput()) awaitReport(l.get(), deadline, check);
  }
}

void TcpLinks::writeAll(TcpLink* l, Deadline deadline, const Check& check) {
  while (!l->writeSome()) {
    check();
    if (Clock::now() >= deadline)
      throw CommTimeoutError(fmt::format("rank {} did not take its messages before the deadline", l->peer()));
    pollLinks(sliceUntil(deadline));
  }
}

void TcpLinks::ownPosted() {
  for (const auto& l : links_) {
    if (l) l->ownOutput();
  }
}

void TcpLinks::awaitReport(TcpLink* l, Deadline deadline, const Check& check) {
  // A broken link takes nothing: wait for the job's health to say why.
  while (l->broken()) {
    check();
    if (Clock::now() >= deadline)
      throw CommTimeoutError(fmt::format("the data link to rank {} broke ({}) and the rank was not reported lost "
                                         "before the deadline",
                                         l->peer(), l->brokenReason()));
    std::this_thread::sleep_for(std::min<microseconds>(sliceUntil(deadline), milliseconds(10)));
  }
}

void TcpLinks::expect(int peer, std::size_t headerBytes, std::span<std::byte> destination) {
  TcpLink* l = link(peer);
  HPU_COMM_CHECK(l != nullptr, "expect over a data link that does not exist");
  l->expect(headerBytes, destination);
}

void TcpLinks::forgetExpectations() {
  for (const auto& l : links_) {
    if (l) l->forgetExpectations();
  }
}

std::unique_ptr<Message> TcpLinks::tryTake(int peer) {
  TcpLink* l = link(peer);
  HPU_COMM_CHECK(l != nullptr, "recv over a data link that does not exist");
  if (auto message = l->take()) return message;
  // Queued messages are written only while this rank reads: then every link.
  if (std::any_of(links_.begin(), links_.end(), [](const auto& o) { return o && o->hasOutput(); }))
    pollLinks(microseconds(0));
  else
    l->readAvailable(/*untilPlaced=*/true);
  return l->take();
}

void TcpLinks::progress(microseconds wait) { pollLinks(wait); }

void TcpLinks::pollLinks(microseconds wait) {
  std::vector<pollfd> fds;
  std::vector<TcpLink*> polled;
  for (const auto& l : links_) {
    if (!l || l->broken()) continue;
    fds.push_back({l->fd(), static_cast<short>(POLLIN | (l->hasOutput() ? POLLOUT : 0)), 0});
    polled.push_back(l.get());
  }
  if (fds.empty()) {
    std::this_thread::sleep_for(wait);
    return;
  }
  const timespec ts = timespecOf(wait);
  if (::ppoll(fds.data(), fds.size(), &ts, nullptr) <= 0) return;
  for (std::size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) polled[i]->readAvailable();
    if (fds[i].revents & POLLOUT) polled[i]->writeSome();
  }
}

}  // namespace hpu::comm::detail
