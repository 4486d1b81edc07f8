#include "rendezvous_server.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "../duration_text.h"
#include "../log_limiter.h"
#include "../rank_list.h"
#include "../store_values.h"
#include "../wire/codec.h"
#include "hpu/comm/errors.h"
#include "net.h"
#include "process_state.h"
#include "stall_meter.h"
#include "hpu/comm/store.h"

namespace hpu::comm::detail {
namespace {

using Clock = RendezvousServer::Clock;
using std::chrono::milliseconds;
constexpr const char* kServerMonitorEndpoint = "inproc://hpu-rendezvous-monitor";
// The server thread's longest wait in poll: a turn of its loop that took
// longer means this thread did not run (an oversubscribed host, this process
// stopped), and the silence of that time is not the peers'.
constexpr milliseconds kLongestPoll{100};
constexpr int kConnectBacklog = 65535;

std::string_view asView(const zmq::message_t& m) { return {static_cast<const char*>(m.data()), m.size()}; }

}  // namespace

// The server thread's state. Everything here runs on that thread.
class RendezvousServer::Session {
 public:
  Session(RendezvousServer& owner) : owner_(owner), config_(owner.config_), socket_(owner.socket_) {
    members_.resize(static_cast<std::size_t>(config_.worldSize));
    referenceDigest_ = config_.config.digest();
    start_ = Clock::now();
    nextProgress_ = start_ + config_.progressInterval;
    nextHeartbeat_ = start_ + config_.heartbeatInterval;
  }

  void run() {
    StallMeter stalls;
    for (;;) {
      const auto now = Clock::now();
      if (owner_.finishing_ && readyToLeave(now)) break;
      zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}, {owner_.monitor_.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 2, pollTimeout(now));
      excuseStall(stalls.turn(Clock::now(), kLongestPoll));
      receiveAll();
      logFailedHandshakes();
      periodic(Clock::now());
    }
    reportDepartures();
    bool anyoneLeft = false;
    for (std::size_t r = 0; r < members_.size(); ++r) {
      if (members_[r].admitted && !members_[r].down) {
        send(members_[r].routingId, Shutdown{});
        anyoneLeft = true;
      }
    }
    // Messages queued for ranks that are gone would hold the context's
    // termination for the whole linger period.
    if (!anyoneLeft) socket_.set(zmq::sockopt::linger, 0);
    socket_.close();
    owner_.monitor_.close();
  }

 private:
  struct Member {
    bool admitted = false;
    bool down = false;
    PeerDownKind downKind = PeerDownKind::kLost;
    std::string routingId;
    std::string address;  // peer IP as the socket saw it
    Hello hello;
    Clock::time_point lastSeen;
    std::string activity;
  };
  struct StoreWaiter {
    std::string routingId;
    StoreRequest request;
    Clock::time_point deadline;
  };
  enum class Phase { kGathering, kRunning, kFailed };

  // --- receiving ---------------------------------------------------------

  void receiveAll() {
    for (;;) {
      std::vector<zmq::message_t> frames;
      for (;;) {
        zmq::message_t frame;
        if (!socket_.recv(frame, zmq::recv_flags::dontwait)) break;
        const bool more = frame.more();
        frames.push_back(std::move(frame));
        if (!more) break;
      }
      if (frames.empty()) return;
      owner_.traffic_.messagesIn.fetch_add(1, std::memory_order_relaxed);
      owner_.traffic_.bytesIn.fetch_add(frames.back().size(), std::memory_order_relaxed);
      if (frames.size() != 2) {
        dropMalformed(frames.back(), fmt::format("{} frames instead of 2", frames.size()));
        continue;
      }
      handle(std::string(asView(frames[0])), frames[1]);
    }
  }

  void handle(const std::string& routingId, const zmq::message_t& payload) {
    ControlMessage message;
    try {
      message = decode({static_cast<const std::byte*>(payload.data()), payload.size()}, config_.keys->helloMac);
    } catch (const MalformedMessage& e) {
      dropMalformed(payload, e.what());
      return;
    }
    if (auto* hello = std::get_if<Hello>(&message)) {
      handleHello(routingId, std::move(*hello), peerAddress(payload));
      return;
    }
    auto it = rankByRouting_.find(routingId);
    if (it == rankByRouting_.end()) {
      logLimited("unjoined " + peerAddress(payload),
                 fmt::format("rank 0: ignored a control message from {} that has not joined the job",
                             peerAddress(payload)));
      return;
    }
    const int rank = it->second;
    Member& member = members_[static_cast<std::size_t>(rank)];
    member.lastSeen = Clock::now();
    if (member.down) {
      if (member.downKind == PeerDownKind::kLost) {
        send(routingId, PeerDown{static_cast<std::uint32_t>(rank), PeerDownKind::kLost,
                                 fmt::format("rank {} was declared lost by rank 0 after {} of silence and cannot "
                                             "rejoin; the job is stopping",
                                             rank, durationText(config_.peerTimeout))});
      }
      return;
    }
    std::visit(
        [&](auto& m) {
          using T = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<T, Heartbeat>) {
            member.activity = std::move(m.activity);
          } else if constexpr (std::is_same_v<T, StoreRequest>) {
            handleStore(routingId, std::move(m));
          } else if constexpr (std::is_same_v<T, Abort>) {
            markDown(rank, PeerDownKind::kAborted, fmt::format("rank {} aborted: {}", rank, m.reason));
          } else if constexpr (std::is_same_v<T, Goodbye>) {
            markDown(rank, PeerDownKind::kLeft, leftTheJob(static_cast<std::uint32_t>(rank)));
          } else {
            logLimited("unexpected " + std::to_string(rank),
                       fmt::format("rank 0: ignored an unexpected control message from rank {}", rank));
          }
        },
        message);
  }

  // Encrypted hellos that fail before the ZAP handler sees them (the peer
  // encrypted to another job's server key).
  void logFailedHandshakes() {
    for (;;) {
      zmq::message_t event;
      if (!owner_.monitor_.recv(event, zmq::recv_flags::dontwait)) return;
      zmq::message_t endpoint;
      if (event.more()) (void)owner_.monitor_.recv(endpoint, zmq::recv_flags::dontwait);
      logLimited("handshake", fmt::format("rank 0: refused an encrypted connection to {}: the handshake failed (a "
                                          "process with another job token?)",
                                          config_.displayAddress));
    }
  }

  // --- rendezvous --------------------------------------------------------

  void handleHello(const std::string& routingId, Hello hello, const std::string& address) {
    const int rank = static_cast<int>(hello.rank);
    if (!hello.authentic) {
      logLimited("token " + address, fmt::format("rank 0: refused a hello from {} claiming rank {}: its job token "
                                                 "does not match this job's",
                                                 address, rank));
      send(routingId, Reject{rank, fmt::format("rank {}: job token does not match rank 0's; give every node the same "
                                               "HPU_JOB_TOKEN or HPU_JOB_TOKEN_FILE",
                                               rank)});
      return;
    }
    if (phase_ == Phase::kFailed) {
      send(routingId, Reject{failureOffender_, failureReason_});
      return;
    }
    if (auto it = rankByRouting_.find(routingId); it != rankByRouting_.end()) {
      // The same process again (it reconnected): answer as before.
      if (phase_ == Phase::kRunning) {
        sendEncoded(routingId, welcome_);
      } else {
        send(routingId, admitted());
      }
      return;
    }
    if (phase_ == Phase::kRunning) {  // a latecomer cannot disturb a running job
      logLimited("late " + address, fmt::format("rank 0: refused a process from {} claiming rank {}: the job already "
                                                "runs with all {} ranks",
                                                address, rank, config_.worldSize));
      send(routingId, Reject{rank, fmt::format("rank {}: the job already runs with all {} ranks; check NODE_RANK and "
                                               "LOCAL_RANK on every node",
                                               rank, config_.worldSize)});
      return;
    }
    if (hello.worldSize != static_cast<std::uint32_t>(config_.worldSize)) {
      fail(routingId, rank, fmt::format("rank {}: world size {} differs from rank 0's {} (WORLD_SIZE = num_nodes x "
                                        "devices must be the same on every node)",
                                        rank, hello.worldSize, config_.worldSize));
      return;
    }
    if (rank < 0 || rank >= config_.worldSize) {
      fail(routingId, -1, fmt::format("a process claims rank {}, outside the world of {} ranks", hello.rank,
                                      config_.worldSize));
      return;
    }
    if (hello.version != config_.version) {
      fail(routingId, rank, fmt::format("rank {}: program version {} differs from rank 0's {}; run the same "
                                        "hpu-train build on every node",
                                        rank, hello.version, config_.version));
      return;
    }
    if (hello.configDigest != referenceDigest_) {
      const auto difference = describeFirstDifference(hello.config, config_.config);
      fail(routingId, rank, fmt::format("rank {}: config differs from rank 0 at {}", rank,
                                        difference.value_or("an unreported key (digest mismatch)")));
      return;
    }
    Member& member = members_[static_cast<std::size_t>(rank)];
    if (member.admitted) {
      fail(routingId, rank, fmt::format("rank {} joined twice: pid {} on {} (node {}, local rank {}) and pid {} on {} "
                                        "(node {}, local rank {}); every node needs its own NODE_RANK and every "
                                        "process its own LOCAL_RANK",
                                        rank, member.hello.pid, member.hello.hostname, member.hello.nodeRank,
                                        member.hello.localRank, hello.pid, hello.hostname, hello.nodeRank,
                                        hello.localRank));
      return;
    }
    member.admitted = true;
    member.routingId = routingId;
    member.address = address;
    member.hello = std::move(hello);
    member.lastSeen = Clock::now();
    rankByRouting_[routingId] = rank;
    ++joined_;
    spdlog::debug("rank 0: rank {} joined from {} ({}/{})", rank, member.hello.hostname, joined_, config_.worldSize);
    send(routingId, admitted());
    if (joined_ == config_.worldSize) {
      phase_ = Phase::kRunning;
      owner_.traffic_.everyRankAdmittedNs =
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
      // One encoding (and MAC) of the table for every rank.
      welcome_ = encode(welcome(), config_.keys->helloMac);
      for (const auto& m : members_) sendEncoded(m.routingId, welcome_);
      spdlog::info("rank 0: all {} ranks joined the rendezvous on {} after {}", config_.worldSize,
                   config_.displayAddress,
                   durationText(std::chrono::duration_cast<milliseconds>(Clock::now() - start_)));
    }
  }

  Admitted admitted() const {
    return Admitted{static_cast<std::uint32_t>(joined_), static_cast<std::uint32_t>(config_.worldSize),
                    static_cast<std::uint32_t>(::getpid()), hostname_, hostId_};
  }

  Welcome welcome() const {
    std::vector<const Hello*> hellos;
    hellos.reserve(members_.size());
    for (const auto& m : members_) hellos.push_back(&m.hello);
    return Welcome{PeerTable::of(hellos), true};
  }

  // The rendezvous cannot succeed: tell the offender and everyone admitted.
  void fail(const std::string& offenderRouting, int offender, const std::string& reason) {
    phase_ = Phase::kFailed;
    failureOffender_ = offender;
    failureReason_ = reason;
    // Rank 0's own client is admitted and raises the reason: logging it here too would print it twice.
    spdlog::debug("rank 0: rendezvous on {} failed: {}", config_.displayAddress, reason);
    const Reject reject{offender, reason};
    if (!offenderRouting.empty()) send(offenderRouting, reject);
    for (const auto& m : members_) {
      if (m.admitted && m.routingId != offenderRouting) send(m.routingId, reject);
    }
  }

  std::vector<int> missingRanks() const {
    std::vector<int> missing;
    for (int r = 0; r < config_.worldSize; ++r) {
      if (!members_[static_cast<std::size_t>(r)].admitted) missing.push_back(r);
    }
    return missing;
  }

  // --- liveness ----------------------------------------------------------

  // Silence counts only while this thread runs (stall_meter.h).
  void excuseStall(Clock::duration stall) {
    if (stall == Clock::duration::zero()) return;
    for (Member& m : members_)
      if (m.admitted && !m.down) m.lastSeen += stall;
  }

  void periodic(Clock::time_point now) {
    if (now >= nextHeartbeat_) {
      const std::string heartbeat = encode(Heartbeat{}, config_.keys->helloMac);
      for (const auto& m : members_) {
        if (m.admitted && !m.down) sendEncoded(m.routingId, heartbeat);
      }
      nextHeartbeat_ = now + config_.heartbeatInterval;
    }
    // The scan over every rank runs once per kLongestPoll, not once per
    // message received: its cost per rank does not grow with the world.
    // Departures are reported on the same beat.
    if (now < nextLivenessScan_) return periodicRendezvous(now);
    nextLivenessScan_ = now + kLongestPoll;
    reportDepartures();
    // Rank 0 runs in this process: while this thread runs, it exists.
    for (int r = 1; r < config_.worldSize; ++r) {
      Member& m = members_[static_cast<std::size_t>(r)];
      if (!m.admitted || m.down || now - m.lastSeen <= config_.peerTimeout) continue;
      const auto silent = std::chrono::duration_cast<milliseconds>(now - m.lastSeen);
      const ProcessState state = processState(m.hello.pid, m.hello.hostId);
      markDown(r, PeerDownKind::kLost,
               fmt::format("rank {} lost: no heartbeat for {} (HPU_PEER_TIMEOUT={}); {}{}", r, durationText(silent),
                           durationText(config_.peerTimeout),
                           describeProcessState(state, m.hello.pid, m.hello.hostname, 0),
                           m.activity.empty() ? "" : "; it was in " + m.activity));
    }
    periodicRendezvous(now);
  }

  void periodicRendezvous(Clock::time_point now) {
    if (phase_ == Phase::kGathering) {
      const auto elapsed = std::chrono::duration_cast<milliseconds>(now - start_);
      if (elapsed >= config_.rendezvousTimeout) {
        timedOut_ = true;
        fail("", -1, fmt::format("rendezvous on {} timed out after {}: {}/{} ranks joined, missing: {}; start every "
                                 "node with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE, or raise "
                                 "HPU_RENDEZVOUS_TIMEOUT",
                                 config_.displayAddress, durationText(config_.rendezvousTimeout), joined_,
                                 config_.worldSize, formatRankList(missingRanks())));
      } else if (now >= nextProgress_) {
        spdlog::info("rank 0: rendezvous on {}: {}/{} ranks joined, missing: {} ({} of {} elapsed)",
                     config_.displayAddress, joined_, config_.worldSize, formatRankList(missingRanks()),
                     durationText(elapsed), durationText(config_.rendezvousTimeout));
        nextProgress_ = now + config_.progressInterval;
      }
    }
    expireStoreWaiters(now);
  }

  void markDown(int rank, PeerDownKind kind, const std::string& reason) {
    Member& member = members_[static_cast<std::size_t>(rank)];
    member.down = true;
    member.downKind = kind;
    // A rank that aborts reports its own error, and every rank failing
    // because of it names it: this line only repeats them.
    if (kind == PeerDownKind::kLeft || kind == PeerDownKind::kAborted) {
      spdlog::debug("rank 0: {}", reason);
    } else {
      spdlog::error("rank 0: {}", reason);
    }
    if (phase_ == Phase::kGathering) {
      if (kind == PeerDownKind::kLeft) {  // gave up waiting: it may come back and join again
        rankByRouting_.erase(member.routingId);
        member = Member{};
        --joined_;
      } else {
        fail("", rank, fmt::format("rank {} joined the rendezvous and then failed: {}", rank, reason));
      }
      return;
    }
    if (kind == PeerDownKind::kLeft) {
      departed_.ranks.push_back(static_cast<std::uint32_t>(rank));
      return;
    }
    sendToEveryRankUp(encode(PeerDown{static_cast<std::uint32_t>(rank), kind, reason}, config_.keys->helloMac));
  }

  // The ranks that left since the last report, to every rank still up.
  void reportDepartures() {
    if (departed_.ranks.empty()) return;
    sendToEveryRankUp(encode(departed_, config_.keys->helloMac));
    departed_.ranks.clear();
  }

  void sendToEveryRankUp(const std::string& bytes) {
    for (const Member& m : members_) {
      if (m.admitted && !m.down) sendEncoded(m.routingId, bytes);
    }
  }

  // Running: once every other rank left or is down. Failed: at the deadline,
  // so that ranks arriving late still learn why, except after the rendezvous
  // timed out, which is every rank's deadline: at once. Gathering: at once.
  bool readyToLeave(Clock::time_point now) const {
    if (now.time_since_epoch().count() >= owner_.finishDeadline_.load() || phase_ == Phase::kGathering) return true;
    if (phase_ == Phase::kFailed) return timedOut_;
    for (int r = 1; r < config_.worldSize; ++r) {
      if (!members_[static_cast<std::size_t>(r)].down) return false;
    }
    return true;
  }

  milliseconds pollTimeout(Clock::time_point now) const {
    auto next = std::min(nextHeartbeat_, now + milliseconds(100));
    for (const auto& w : waiters_) next = std::min(next, w.deadline);
    return std::max(milliseconds(0), std::chrono::ceil<milliseconds>(next - now));
  }

  // --- store -------------------------------------------------------------

  void handleStore(const std::string& routingId, StoreRequest request) {
    try {
      for (const auto& key : request.keys) checkStoreKey(key);
      if (request.op != StoreRequest::Op::kWait && request.keys.size() != 1) {
        throw CommError("store request needs exactly one key");
      }
      switch (request.op) {
        case StoreRequest::Op::kSet:
          checkStoreValue(request.keys[0], request.value.size());
          values_.insert_or_assign(request.keys[0], std::move(request.value));
          reply(routingId, request.id, StoreReply::Status::kOk, "");
          wakeStoreWaiters();
          return;
        case StoreRequest::Op::kAdd: {
          auto it = values_.find(request.keys[0]);
          const std::int64_t sum =
              addToStoredInteger(request.keys[0], it == values_.end() ? nullptr : &it->second, request.delta);
          values_.insert_or_assign(request.keys[0], std::to_string(sum));
          reply(routingId, request.id, StoreReply::Status::kOk, std::to_string(sum));
          wakeStoreWaiters();
          return;
        }
        case StoreRequest::Op::kGet:
        case StoreRequest::Op::kWait: {
          const auto deadline = Clock::now() + milliseconds(request.timeoutMs);
          StoreWaiter waiter{routingId, std::move(request), deadline};
          if (!answerIfReady(waiter)) waiters_.push_back(std::move(waiter));
          return;
        }
      }
    } catch (const CommError& e) {
      reply(routingId, request.id, StoreReply::Status::kError, e.what());
    }
  }

  bool answerIfReady(const StoreWaiter& waiter) {
    for (const auto& key : waiter.request.keys) {
      if (!values_.contains(key)) return false;
    }
    reply(waiter.routingId, waiter.request.id, StoreReply::Status::kOk,
          waiter.request.op == StoreRequest::Op::kGet ? values_.at(waiter.request.keys[0]) : std::string());
    return true;
  }

  void wakeStoreWaiters() {
    std::erase_if(waiters_, [&](const StoreWaiter& w) { return answerIfReady(w); });
  }

  void expireStoreWaiters(Clock::time_point now) {
    std::erase_if(waiters_, [&](const StoreWaiter& w) {
      if (now < w.deadline) return false;
      reply(w.routingId, w.request.id, StoreReply::Status::kTimeout, "");
      return true;
    });
  }

  void reply(const std::string& routingId, std::uint64_t id, StoreReply::Status status, std::string value) {
    send(routingId, StoreReply{id, status, std::move(value)});
  }

  // --- sending and logging -----------------------------------------------

  void send(const std::string& routingId, const ControlMessage& message) {
    sendEncoded(routingId, encode(message, config_.keys->helloMac));
  }

  void sendEncoded(const std::string& routingId, const std::string& bytes) {
    owner_.traffic_.messagesOut.fetch_add(1, std::memory_order_relaxed);
    owner_.traffic_.bytesOut.fetch_add(bytes.size(), std::memory_order_relaxed);
    try {
      zmq::message_t id(routingId.data(), routingId.size());
      zmq::message_t body(bytes.data(), bytes.size());
      if (socket_.send(id, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
        socket_.send(body, zmq::send_flags::dontwait);
      }
    } catch (const zmq::error_t& e) {
      spdlog::debug("rank 0: a control message to a departed peer was dropped: {}", e.what());
    }
  }

  static std::string peerAddress(const zmq::message_t& frame) {
    const char* address = zmq_msg_gets(const_cast<zmq_msg_t*>(frame.handle()), "Peer-Address");
    return address != nullptr ? address : "a local process";
  }

  void dropMalformed(const zmq::message_t& frame, const std::string& why) {
    logLimited("malformed " + peerAddress(frame),
               fmt::format("rank 0: dropped a malformed rendezvous message from {}: {}", peerAddress(frame), why));
  }

  void logLimited(const std::string& kind, const std::string& message) {
    std::size_t suppressed = 0;
    if (!limiter_.allow(kind, suppressed)) return;
    if (suppressed != 0) {
      spdlog::warn("{} ({} similar messages suppressed)", message, suppressed);
    } else {
      spdlog::warn("{}", message);
    }
  }

  RendezvousServer& owner_;
  const ServerConfig& config_;
  zmq::socket_t& socket_;
  Phase phase_ = Phase::kGathering;
  bool timedOut_ = false;  // failed because HPU_RENDEZVOUS_TIMEOUT passed
  std::vector<Member> members_;
  std::map<std::string, int> rankByRouting_;
  int joined_ = 0;
  int failureOffender_ = -1;
  std::string failureReason_;
  std::string welcome_;  // the peer table, encoded and signed once every rank joined
  PeersLeft departed_;   // not reported yet
  std::array<std::uint8_t, 32> referenceDigest_{};
  const std::string hostname_ = hostName();
  const std::string hostId_ = hostIdentity();
  Clock::time_point start_;
  Clock::time_point nextProgress_;
  Clock::time_point nextHeartbeat_;
  Clock::time_point nextLivenessScan_;
  std::map<std::string, std::string, std::less<>> values_;
  std::vector<StoreWaiter> waiters_;
  LogLimiter limiter_;
};

RendezvousServer::RendezvousServer(zmq::context_t& context, ServerConfig config)
    : config_(std::move(config)),
      socket_(bind(context)),
      monitor_(makeSocket(context, zmq::socket_type::pair, SocketLimits{.lingerMs = 0, .maxMessageBytes = 4096})) {
  if (zmq_socket_monitor(socket_.handle(), kServerMonitorEndpoint,
                         ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) != 0) {
    throw CommError(fmt::format("cannot monitor the rendezvous socket: {}", zmq_strerror(zmq_errno())));
  }
  monitor_.connect(kServerMonitorEndpoint);
  finishDeadline_ = Clock::time_point::max().time_since_epoch().count();
  thread_ = std::thread([this] { Session(*this).run(); });
}

zmq::socket_t RendezvousServer::bind(zmq::context_t& context) {
  zmq::socket_t socket = makeSocket(context, zmq::socket_type::router,
                                    SocketLimits{.lingerMs = 1000,
                                                 .maxMessageBytes = static_cast<std::int64_t>(kMaxControlMessage),
                                                 .highWaterMark = 100'000,
                                                 .ipv6 = config_.ipv6});
  socket.set(zmq::sockopt::router_mandatory, true);
  socket.set(zmq::sockopt::router_handover, true);
  // Every rank connects at once: ZeroMQ's default backlog of 100 drops the
  // connections past it, and each dropped SYN costs its rank 1, 3, 7 s of
  // TCP retries (the kernel caps this at net.core.somaxconn).
  socket.set(zmq::sockopt::backlog, kConnectBacklog);
  secureServer(socket, config_.security, *config_.keys, "hpu-rendezvous");
  try {
    socket.bind(config_.bindEndpoint);
  } catch (const zmq::error_t& e) {
    if (e.num() == EADDRINUSE) {
      throw RendezvousError(fmt::format("rank 0 cannot listen on {}: address already in use (another job or process "
                                        "holds port {}); choose another MASTER_PORT",
                                        config_.displayAddress, config_.displayAddress.substr(
                                                                     config_.displayAddress.rfind(':') + 1)));
    }
    if (e.num() == EADDRNOTAVAIL) {
      throw RendezvousError(fmt::format("rank 0 cannot listen on {}: that address does not belong to this machine; "
                                        "MASTER_ADDR must name the node that runs rank 0",
                                        config_.displayAddress));
    }
    throw RendezvousError(fmt::format("rank 0 cannot listen on {}: {}", config_.displayAddress, e.what()));
  }
  return socket;
}

void RendezvousServer::finish(Clock::time_point deadline) {
  finishDeadline_ = deadline.time_since_epoch().count();
  finishing_ = true;
}

RendezvousServer::~RendezvousServer() {
  if (!finishing_) finish(Clock::now() + config_.peerTimeout);
  thread_.join();
}

}  // namespace hpu::comm::detail
