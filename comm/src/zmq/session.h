// What one process holds while it is a member of a ZeroMQ job: two contexts,
// the keys derived from the job token, a ZAP handler per context (bound
// first), rank 0's RendezvousServer, the ControlClient and the shared
// PeerHealth. The control plane (rendezvous, store, heartbeats) has a
// context and I/O thread of its own: the data plane's connection storms
// (every local peer's socket at start-up, with 256 ranks on a host 65,000
// of them) and traffic never queue a heartbeat behind them. The
// transport and the store keep it alive; it leaves the job when the last of
// them is destroyed (goodbye, then rank 0 waits for the others, bounded).
// Thread-safety: accessors are thread-safe once startClient() returned.
#pragma once

#include <memory>

#include <zmq.hpp>

#include "../security/job_keys.h"
#include "control_client.h"
#include "hpu/comm/rendezvous.h"
#include "net.h"
#include "peer_health.h"
#include "rendezvous_server.h"
#include "zap_handler.h"

namespace hpu::comm::detail {

class ZmqSession {
 public:
  // Creates the context and ZAP handler, and on global rank 0 binds the
  // rendezvous server. Throws RendezvousError when it cannot bind.
  ZmqSession(const JoinOptions& options, const ResolvedAddress& master);
  ~ZmqSession();
  ZmqSession(const ZmqSession&) = delete;
  ZmqSession& operator=(const ZmqSession&) = delete;

  // Connects to rank 0 and sends `hello`.
  void startClient(Hello hello);

  // The data plane's context.
  zmq::context_t& context() { return context_; }
  const JobKeys& keys() const { return keys_; }
  // CURVE off loopback (or when asked), else PLAIN for the data plane.
  Security dataSecurity() const { return encrypted_ ? Security::kCurve : Security::kPlain; }
  const std::shared_ptr<PeerHealth>& health() const { return health_; }
  ControlClient& client() { return *client_; }
  const JoinOptions& options() const { return options_; }

 private:
  const JoinOptions options_;
  const ResolvedAddress master_;
  const bool encrypted_;
  zmq::context_t context_;
  zmq::context_t controlContext_;
  JobKeys keys_;
  std::unique_ptr<ZapHandler> zap_;
  std::unique_ptr<ZapHandler> controlZap_;
  std::unique_ptr<RendezvousServer> server_;
  std::shared_ptr<PeerHealth> health_;
  std::unique_ptr<ControlClient> client_;
};

}  // namespace hpu::comm::detail
