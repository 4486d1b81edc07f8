// Every rank's connection to rank 0's RendezvousServer (a DEALER socket
// served by one thread): says hello (again after every reconnect until
// admitted), waits for the peer table, then carries store requests,
// heartbeats (with what the rank is doing), aborts and the final goodbye,
// and records PeerDown reports in the shared PeerHealth. Once the peer table
// arrived, declares rank 0 lost when it has been silent for the peer timeout
// (before, the rendezvous timeout governs: in a large job the table itself,
// queued ahead of rank 0's heartbeats, may take longer than the peer timeout
// to reach every rank). A CURVE handshake that rank 0 refuses (another job
// token) fails the rendezvous at once.
// Thread-safety: every public method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "../security/job_keys.h"
#include "../wire/control_messages.h"
#include "peer_health.h"
#include "sockets.h"

namespace hpu::comm::detail {

struct ClientConfig {
  std::string serverEndpoint;  // "tcp://127.0.0.1:29500"
  std::string displayAddress;  // "127.0.0.1:29500"
  bool ipv6 = false;
  Security security = Security::kNone;
  const JobKeys* keys = nullptr;
  Hello hello;
  std::chrono::milliseconds rendezvousTimeout{300'000};  // for messages
  std::chrono::milliseconds peerTimeout{5'000};
  std::chrono::milliseconds heartbeatInterval{1'000};
};

class ControlClient {
 public:
  using Clock = std::chrono::steady_clock;

  ControlClient(zmq::context_t& context, ClientConfig config, std::shared_ptr<PeerHealth> health);
  // Says goodbye (when admitted and not aborted) and stops the thread; the
  // socket lingers up to 1 s to deliver it.
  ~ControlClient();
  ControlClient(const ControlClient&) = delete;
  ControlClient& operator=(const ControlClient&) = delete;

  // The peer table, once rank 0 published it. Throws RendezvousError when
  // rank 0 rejects the job or this rank, or when `deadline` passes (a rank
  // rank 0 admitted waits up to 5 s longer for rank 0's verdict).
  PeerTable awaitWelcome(Clock::time_point deadline);

  // Sends a store request and waits for its reply. Throws PeerLostError when
  // rank 0 is gone, CommTimeoutError at `deadline`.
  StoreReply request(StoreRequest request, Clock::time_point deadline);

  // Reported with every heartbeat.
  void setActivity(std::string_view activity);
  // Tells rank 0 (and through it everyone) that this rank fails.
  void abort(std::string_view reason);
  // Fault injection: sends nothing more (no heartbeat, no goodbye) and
  // ignores what arrives, so rank 0 is declared lost after the peer timeout.
  void dropForTesting();

 private:
  void serve();
  void post(const ControlMessage& message);
  void flushOutbox();
  void receiveAll();
  void handle(ControlMessage message);
  void handleMonitorEvents();
  void checkServerSilence(Clock::time_point now);

  const ClientConfig config_;
  const std::shared_ptr<PeerHealth> health_;
  zmq::socket_t socket_;
  zmq::socket_t monitor_;
  int wakeFd_ = -1;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::string> outbox_;
  bool stop_ = false;
  bool aborted_ = false;
  bool dropped_ = false;
  bool admitted_ = false;
  bool storeClosed_ = false;
  bool serverLost_ = false;  // this client declared rank 0 lost
  std::optional<Admitted> admission_;  // with rank 0's process
  std::optional<PeerTable> welcome_;
  std::optional<std::string> rejection_;
  std::map<std::uint64_t, std::optional<StoreReply>> pending_;
  std::uint64_t nextRequestId_ = 1;
  int failedHandshakes_ = 0;
  int connections_ = 0;  // to rank 0, so far
  std::string activity_;
  Clock::time_point lastFromServer_;
  std::thread thread_;
};

}  // namespace hpu::comm::detail
