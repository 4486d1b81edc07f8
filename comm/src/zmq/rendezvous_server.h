// Rank 0's side of the rendezvous, and the job's control hub afterwards: a
// ROUTER socket bound to MASTER_ADDR:MASTER_PORT (that address, never *)
// served by one thread.
//
// Rendezvous: admits each rank once. An authentic Hello whose world size,
// program version or config digest differs from rank 0's, or that repeats
// an admitted rank from another process, fails the whole rendezvous: rank 0
// logs the reason and sends it to the offender and every admitted rank. A
// Hello with a wrong MAC (another token) or a malformed frame is refused and
// logged (rate limited) without affecting the job. Every progress interval
// it logs "k/N ranks joined, missing: ..."; after the rendezvous timeout it
// fails naming the missing ranks. When all N joined it publishes the peer
// table (Welcome).
//
// Afterwards: serves the key-value store, exchanges heartbeats (every
// heartbeat interval each way), declares a rank lost after peerTimeout of
// silence, and relays aborts and losses to every rank at once (PeerDown),
// departures once per 100 ms (PeersLeft).
// Thread-safety: construct/finish/destroy from one thread; the work happens
// on the server's own thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "../security/job_keys.h"
#include "../wire/control_messages.h"
#include "sockets.h"

namespace hpu::comm::detail {

struct ServerConfig {
  std::string bindEndpoint;    // "tcp://127.0.0.1:29500"
  std::string displayAddress;  // "127.0.0.1:29500", for messages
  bool ipv6 = false;
  Security security = Security::kNone;
  const JobKeys* keys = nullptr;
  int worldSize = 1;
  std::string version;  // rank 0's program version
  ConfigFingerprint config;  // rank 0's config
  std::chrono::milliseconds rendezvousTimeout{300'000};
  std::chrono::milliseconds peerTimeout{5'000};
  std::chrono::milliseconds heartbeatInterval{1'000};
  std::chrono::milliseconds progressInterval{10'000};
};

// What the server has received and sent since it started (for the
// control-plane bench: messages/s, bytes per rank at start-up).
struct ServerTraffic {
  std::atomic<std::uint64_t> messagesIn{0}, bytesIn{0}, messagesOut{0}, bytesOut{0};
  // When the last rank was admitted (steady_clock, ns since its epoch), or 0.
  std::atomic<std::int64_t> everyRankAdmittedNs{0};
};

class RendezvousServer {
 public:
  using Clock = std::chrono::steady_clock;

  // Binds and starts serving. Throws RendezvousError when the address cannot
  // be bound (in use: names it and suggests another MASTER_PORT).
  RendezvousServer(zmq::context_t& context, ServerConfig config);
  // finish(now + peerTimeout) unless finish was called, then joins.
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  // Stops serving once every other rank has left or is down, or at `deadline`
  // (so ranks still using the store after rank 0 finished are served). After
  // a failed rendezvous it serves until `deadline`, telling latecomers why.
  void finish(Clock::time_point deadline);

  const ServerTraffic& traffic() const { return traffic_; }

 private:
  class Session;
  zmq::socket_t bind(zmq::context_t& context);

  ServerConfig config_;
  zmq::socket_t socket_;
  zmq::socket_t monitor_;  // handshake failures: encrypted peers with another token
  std::atomic<bool> finishing_{false};
  std::atomic<Clock::rep> finishDeadline_{0};
  ServerTraffic traffic_;
  std::thread thread_;
};

}  // namespace hpu::comm::detail
