// Every ZeroMQ socket of comm/ is made here, so none misses its limits:
// LINGER (bounded close), ZMQ_MAXMSGSIZE (a peer cannot make us allocate
// more), send/receive timeouts, high-water marks, bounded reconnects and
// handshakes. Security is applied by role:
//   kNone   loopback rendezvous (hello is authenticated by its MAC instead)
//   kPlain  loopback data plane: PLAIN password derived from the job token,
//           checked by the process's ZAP handler
//   kCurve  any non-loopback socket: CURVE encryption; the ZAP handler admits
//           only the job's derived client key
// Thread-safety: a socket belongs to one thread at a time.
#pragma once

#include <string_view>

#include <zmq.hpp>

#include "../security/job_keys.h"

namespace hpu::comm::detail {

struct SocketLimits {
  int lingerMs = 0;
  std::int64_t maxMessageBytes = 0;  // inbound cap
  int highWaterMark = 1000;           // messages queued per peer, each way
  bool ipv6 = false;
};

enum class Security { kNone, kPlain, kCurve };

// A socket with `limits`, 1 s send/receive timeouts (every call site polls
// with its own deadline first), 100 ms..1 s reconnects, 5 s connect timeout
// and a 10 s handshake limit.
zmq::socket_t makeSocket(zmq::context_t& context, zmq::socket_type type, const SocketLimits& limits);

// Makes `socket` the server (bind side) of `security`; `zapDomain` labels
// its connections in the ZAP handler's log.
void secureServer(zmq::socket_t& socket, Security security, const JobKeys& keys, std::string_view zapDomain);
// Makes `socket` the client (connect side) of `security`.
void secureClient(zmq::socket_t& socket, Security security, const JobKeys& keys);

// Where a process's ZAP handler listens (per ZeroMQ context).
inline constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";

}  // namespace hpu::comm::detail
