#include "sockets.h"

namespace hpu::comm::detail {

zmq::socket_t makeSocket(zmq::context_t& context, zmq::socket_type type, const SocketLimits& limits) {
  zmq::socket_t socket(context, type);
  socket.set(zmq::sockopt::linger, limits.lingerMs);
  socket.set(zmq::sockopt::maxmsgsize, limits.maxMessageBytes);
  socket.set(zmq::sockopt::sndtimeo, 1000);
  socket.set(zmq::sockopt::rcvtimeo, 1000);
  socket.set(zmq::sockopt::sndhwm, limits.highWaterMark);
  socket.set(zmq::sockopt::rcvhwm, limits.highWaterMark);
  socket.set(zmq::sockopt::reconnect_ivl, 100);
  socket.set(zmq::sockopt::reconnect_ivl_max, 1000);
  socket.set(zmq::sockopt::connect_timeout, 5000);
  socket.set(zmq::sockopt::handshake_ivl, 10000);
  socket.set(zmq::sockopt::ipv6, limits.ipv6);
  return socket;
}

void secureServer(zmq::socket_t& socket, Security security, const JobKeys& keys, std::string_view zapDomain) {
  switch (security) {
    case Security::kNone: return;
    case Security::kPlain: socket.set(zmq::sockopt::plain_server, true); break;
    case Security::kCurve:
      socket.set(zmq::sockopt::curve_server, true);
      socket.set(zmq::sockopt::curve_secretkey, zmq::const_buffer(keys.curveServer.secretKey.data(), 32));
      break;
  }
  socket.set(zmq::sockopt::zap_domain, std::string(zapDomain));
}

void secureClient(zmq::socket_t& socket, Security security, const JobKeys& keys) {
  switch (security) {
    case Security::kNone: return;
    case Security::kPlain:
      socket.set(zmq::sockopt::plain_username, "hpu-train");
      socket.set(zmq::sockopt::plain_password, keys.dataPassword);
      return;
    case Security::kCurve:
      socket.set(zmq::sockopt::curve_serverkey, zmq::const_buffer(keys.curveServer.publicKey.data(), 32));
      socket.set(zmq::sockopt::curve_publickey, zmq::const_buffer(keys.curveClient.publicKey.data(), 32));
      socket.set(zmq::sockopt::curve_secretkey, zmq::const_buffer(keys.curveClient.secretKey.data(), 32));
      return;
  }
}

}  // namespace hpu::comm::detail
