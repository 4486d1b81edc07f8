#include "control_client.h"

#include <sodium.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "../duration_text.h"
#include "../store_values.h"
#include "../wire/codec.h"
#include "hpu/comm/errors.h"
#include "process_state.h"
#include "stall_meter.h"

namespace hpu::comm::detail {
namespace {

using std::chrono::milliseconds;
// Each client's own: several may share a context (the control-plane bench).
std::string monitorEndpoint() {
  static std::atomic<std::uint64_t> next{0};
  return fmt::format("inproc://hpu-control-monitor-{}", next++);
}
constexpr std::size_t kRoutingIdBytes = 16;
constexpr std::chrono::seconds kVerdictGrace{5};
// The longest the client thread sleeps when nothing is due.
constexpr milliseconds kIdleWait{1000};
// How soon a message the socket could not take is offered again.
constexpr milliseconds kRetryWait{10};

std::string randomRoutingId() {
  std::string id(kRoutingIdBytes, '\0');
  randombytes_buf(id.data(), id.size());
  id[0] = static_cast<char>(id[0] | 0x01);  // ZeroMQ reserves ids starting with a zero byte
  return id;
}

}  // namespace

ControlClient::ControlClient(zmq::context_t& context, ClientConfig config, std::shared_ptr<PeerHealth> health)
    : config_(std::move(config)),
      health_(std::move(health)),
      socket_(makeSocket(context, zmq::socket_type::dealer,
                         SocketLimits{.lingerMs = 1000,
                                      .maxMessageBytes = static_cast<std::int64_t>(kMaxControlMessage),
                                      .highWaterMark = 100'000,
                                      .ipv6 = config_.ipv6})),
      monitor_(makeSocket(context, zmq::socket_type::pair, SocketLimits{.lingerMs = 0, .maxMessageBytes = 4096})) {
  socket_.set(zmq::sockopt::routing_id, randomRoutingId());
  secureClient(socket_, config_.security, *config_.keys);
  const std::string monitor = monitorEndpoint();
  if (zmq_socket_monitor(socket_.handle(), monitor.c_str(),
                         ZMQ_EVENT_CONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                             ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) != 0) {
    throw CommError(fmt::format("cannot monitor the rendezvous socket: {}", zmq_strerror(zmq_errno())));
  }
  monitor_.connect(monitor);
  wakeFd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wakeFd_ < 0) throw CommError(fmt::format("cannot create an eventfd: {}", std::strerror(errno)));
  socket_.connect(config_.serverEndpoint);
  post(config_.hello);
  thread_ = std::thread([this] { serve(); });
}

ControlClient::~ControlClient() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] auto written = ::write(wakeFd_, &one, sizeof one);
  thread_.join();
  ::close(wakeFd_);
}

void ControlClient::post(const ControlMessage& message) {
  std::string bytes = encode(message, config_.keys->helloMac);
  {
    std::lock_guard lock(mutex_);
    if (dropped_) return;
    outbox_.push_back(std::move(bytes));
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] auto written = ::write(wakeFd_, &one, sizeof one);
}

PeerTable ControlClient::awaitWelcome(Clock::time_point deadline) {
  const int rank = static_cast<int>(config_.hello.rank);
  std::unique_lock lock(mutex_);
  changed_.wait_until(lock, deadline, [&] { return welcome_ || rejection_; });
  // Admitted ranks (rank 0 included) give rank 0's verdict, which names the
  // missing ranks, time to arrive.
  if (admitted_) changed_.wait_until(lock, deadline + kVerdictGrace, [&] { return welcome_ || rejection_; });
  if (rejection_) throw RendezvousError(*rejection_);
  if (welcome_) return *welcome_;
  if (admitted_) {
    throw RendezvousError(fmt::format("rank {}: joined rank 0 at {}, but the job did not assemble within {} "
                                      "(HPU_RENDEZVOUS_TIMEOUT); rank 0's log names the missing ranks",
                                      rank, config_.displayAddress, durationText(config_.rendezvousTimeout)));
  }
  throw RendezvousError(fmt::format("rank {}: no answer from rank 0 at {} within {}; check that the node with "
                                    "NODE_RANK=0 runs and that MASTER_ADDR and MASTER_PORT point to it "
                                    "(HPU_RENDEZVOUS_TIMEOUT)",
                                    rank, config_.displayAddress, durationText(config_.rendezvousTimeout)));
}

StoreReply ControlClient::request(StoreRequest request, Clock::time_point deadline) {
  std::uint64_t id = 0;
  {
    std::lock_guard lock(mutex_);
    id = nextRequestId_++;
    pending_.emplace(id, std::nullopt);
  }
  request.id = id;
  const std::string key = request.keys.empty() ? std::string() : request.keys.front();
  post(request);
  std::unique_lock lock(mutex_);
  for (;;) {
    auto& slot = pending_.at(id);
    if (slot) {
      StoreReply reply = std::move(*slot);
      pending_.erase(id);
      return reply;
    }
    auto failure = health_->firstFailure();
    if (storeClosed_ || (failure && failure->rank == 0)) {
      pending_.erase(id);
      throw PeerLostError(0, failure ? failure->reason : std::string("rank 0 left the job and closed the store"));
    }
    // The server answers timeouts itself; allow its reply a moment to arrive.
    if (Clock::now() >= deadline + milliseconds(500)) {
      pending_.erase(id);
      throw CommTimeoutError(storeTimeoutMessage("request", key));
    }
    changed_.wait_for(lock, milliseconds(100));
  }
}

void ControlClient::setActivity(std::string_view activity) {
  std::lock_guard lock(mutex_);
  activity_.assign(activity);
}

void ControlClient::abort(std::string_view reason) {
  {
    std::lock_guard lock(mutex_);
    if (aborted_) return;
    aborted_ = true;
  }
  post(Abort{std::string(reason)});
}

void ControlClient::dropForTesting() {
  std::lock_guard lock(mutex_);
  dropped_ = true;
  outbox_.clear();
}

void ControlClient::serve() {
  auto nextHeartbeat = Clock::now();
  StallMeter stalls;
  for (;;) {
    zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0},
                               {monitor_.handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, wakeFd_, ZMQ_POLLIN, 0}};
    const auto now = Clock::now();
    // Sleeps until the next thing due (a heartbeat, rank 0's silence
    // reaching the peer timeout) or until woken by a message, a post or
    // stop: thousands of ranks waking on a timer would starve rank 0 and
    // each other. Until admitted nothing is due; until the peer table
    // arrived, rank 0's silence is not judged (checkServerSilence).
    milliseconds wait = kIdleWait;
    {
      std::lock_guard lock(mutex_);
      if (admitted_ && !storeClosed_ && !serverLost_) {
        auto due = nextHeartbeat;
        if (welcome_) due = std::min(due, lastFromServer_ + config_.peerTimeout + milliseconds(1));
        wait = std::clamp(std::chrono::ceil<milliseconds>(due - now), milliseconds(0), kIdleWait);
      }
      if (!outbox_.empty()) wait = std::min(wait, kRetryWait);  // the socket was full
    }
    zmq::poll(items, 3, wait);
    // Rank 0's silence counts only while this thread runs.
    if (const auto stall = stalls.turn(Clock::now(), wait); stall != Clock::duration::zero()) {
      std::lock_guard lock(mutex_);
      lastFromServer_ += stall;
    }
    if (items[2].revents & ZMQ_POLLIN) {
      std::uint64_t count = 0;
      [[maybe_unused]] auto read = ::read(wakeFd_, &count, sizeof count);
    }
    bool stopping = false;
    bool aborted = false;
    bool admitted = false;
    {
      std::lock_guard lock(mutex_);
      stopping = stop_;
      aborted = aborted_;
      admitted = admitted_;
    }
    if (stopping) {
      if (!aborted && admitted) post(Goodbye{});
      flushOutbox();
      break;
    }
    flushOutbox();
    receiveAll();
    handleMonitorEvents();
    const auto after = Clock::now();
    std::string activity;
    {
      std::lock_guard lock(mutex_);
      admitted = admitted_;
      activity = activity_;
    }
    if (admitted && after >= nextHeartbeat) {
      post(Heartbeat{std::move(activity)});
      flushOutbox();
      nextHeartbeat = after + config_.heartbeatInterval;
    }
    checkServerSilence(after);
  }
  {
    // Nobody is left to deliver to: do not hold the context's termination.
    std::lock_guard lock(mutex_);
    const auto failure = health_->firstFailure();
    if (dropped_ || storeClosed_ || (failure && failure->rank == 0)) socket_.set(zmq::sockopt::linger, 0);
  }
  monitor_.close();
  socket_.close();
}

void ControlClient::flushOutbox() {
  std::lock_guard lock(mutex_);
  while (!outbox_.empty()) {
    zmq::message_t message(outbox_.front().data(), outbox_.front().size());
    if (!socket_.send(message, zmq::send_flags::dontwait)) return;  // high-water mark: retry on the next turn
    outbox_.pop_front();
  }
}

void ControlClient::receiveAll() {
  for (;;) {
    zmq::message_t message;
    if (!socket_.recv(message, zmq::recv_flags::dontwait)) return;
    {
      std::lock_guard lock(mutex_);
      if (dropped_) continue;
      lastFromServer_ = Clock::now();
    }
    try {
      handle(decode({static_cast<const std::byte*>(message.data()), message.size()}, config_.keys->helloMac));
    } catch (const MalformedMessage& e) {
      spdlog::warn("rank {}: dropped a malformed message from rank 0 at {}: {}", config_.hello.rank,
                   config_.displayAddress, e.what());
    }
  }
}

void ControlClient::handle(ControlMessage message) {
  const int rank = static_cast<int>(config_.hello.rank);
  if (auto* down = std::get_if<PeerDown>(&message)) {
    health_->report(static_cast<int>(down->rank), down->kind, std::move(down->reason));
    changed_.notify_all();
    return;
  }
  if (auto* left = std::get_if<PeersLeft>(&message)) {
    for (const std::uint32_t peer : left->ranks) {
      health_->report(static_cast<int>(peer), PeerDownKind::kLeft, leftTheJob(peer));
    }
    changed_.notify_all();
    return;
  }
  std::lock_guard lock(mutex_);
  std::visit(
      [&](auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, Admitted>) {
          admitted_ = true;
          admission_ = std::move(m);
        } else if constexpr (std::is_same_v<T, Welcome>) {
          if (welcome_ || rejection_) return;
          if (!m.authentic) {
            rejection_ = fmt::format("rank {}: the process listening on {} is not rank 0 of this job (its peer table "
                                     "is not signed with this job's token)",
                                     rank, config_.displayAddress);
          } else if (m.peers.ranks.size() != config_.hello.worldSize) {
            rejection_ = fmt::format("rank {}: rank 0 published {} peers for a world of {}", rank,
                                     m.peers.ranks.size(), config_.hello.worldSize);
          } else {
            welcome_ = std::move(m.peers);
          }
        } else if constexpr (std::is_same_v<T, Reject>) {
          if (welcome_ || rejection_) return;
          rejection_ = m.offender == rank ? m.reason : fmt::format("rank {}: rendezvous failed: {}", rank, m.reason);
        } else if constexpr (std::is_same_v<T, StoreReply>) {
          if (auto it = pending_.find(m.id); it != pending_.end()) it->second = std::move(m);
        } else if constexpr (std::is_same_v<T, Shutdown>) {
          storeClosed_ = true;
        }
      },
      message);
  changed_.notify_all();
}

void ControlClient::handleMonitorEvents() {
  for (;;) {
    zmq::message_t event;
    if (!monitor_.recv(event, zmq::recv_flags::dontwait)) return;
    zmq::message_t address;
    if (event.more()) (void)monitor_.recv(address, zmq::recv_flags::dontwait);
    if (event.size() < 6) continue;
    std::uint16_t id = 0;
    std::memcpy(&id, event.data(), sizeof id);
    if (id == ZMQ_EVENT_CONNECTED) {
      // The hello posted at construction waits in the socket's queue for the
      // first connection; a later one may follow a connection that died with
      // the hello on its way. (Saying it twice costs rank 0 a decode and, once
      // the job runs, a second copy of the peer table.)
      bool resend = false;
      {
        std::lock_guard lock(mutex_);
        resend = ++connections_ > 1 && !welcome_ && !rejection_;
      }
      if (resend) post(config_.hello);
    } else if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      failedHandshakes_ = 0;
    } else {
      // Refused by rank 0's ZAP handler (AUTH), or dropped because this
      // process encrypted to another server key (rank 0 cannot decrypt our
      // hello and closes: NO_DETAIL here). Either way the tokens differ; a
      // single dropped handshake may also be a restart, so wait for a second.
      const bool definite = id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH || id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL;
      std::lock_guard lock(mutex_);
      if ((definite || ++failedHandshakes_ >= 2) && !welcome_ && !rejection_) {
        rejection_ = fmt::format("rank {}: rank 0 at {} refused this process's encrypted handshake: its job token "
                                 "differs; give every node the same HPU_JOB_TOKEN or HPU_JOB_TOKEN_FILE",
                                 config_.hello.rank, config_.displayAddress);
        changed_.notify_all();
      }
    }
  }
}

void ControlClient::checkServerSilence(Clock::time_point now) {
  Clock::time_point last;
  Admitted rankZero;
  {
    std::lock_guard lock(mutex_);
    if (!welcome_ || storeClosed_ || serverLost_) return;
    last = lastFromServer_;
    rankZero = *admission_;
  }
  if (now - last <= config_.peerTimeout) return;
  const auto silent = std::chrono::duration_cast<milliseconds>(now - last);
  {
    std::lock_guard lock(mutex_);
    serverLost_ = true;
  }
  health_->report(0, PeerDownKind::kLost,
                  fmt::format("rank 0 lost: no message from rank 0 at {} for {} (HPU_PEER_TIMEOUT={}); {}",
                              config_.displayAddress, durationText(silent), durationText(config_.peerTimeout),
                              describeProcessState(processState(rankZero.pid, rankZero.hostId), rankZero.pid,
                                                   rankZero.hostname, static_cast<int>(config_.hello.rank))));
  changed_.notify_all();
}

}  // namespace hpu::comm::detail
