#include "session.h"

#include <spdlog/fmt/fmt.h>

namespace hpu::comm::detail {
namespace {

std::string displayAddress(const ResolvedAddress& address, int port) {
  return address.ipv6 ? fmt::format("[{}]:{}", address.ip, port) : fmt::format("{}:{}", address.ip, port);
}

}  // namespace

ZmqSession::ZmqSession(const JoinOptions& options, const ResolvedAddress& master)
    : options_(options),
      master_(master),
      encrypted_(!master.loopback || options.encryptLoopback),
      context_(1),
      controlContext_(1),
      keys_(options.token),
      health_(std::make_shared<PeerHealth>(options.settings.peerTimeout)) {
  context_.set(zmq::ctxopt::blocky, false);
  controlContext_.set(zmq::ctxopt::blocky, false);
  zap_ = std::make_unique<ZapHandler>(context_, keys_, options.cluster.globalRank);
  controlZap_ = std::make_unique<ZapHandler>(controlContext_, keys_, options.cluster.globalRank);
  if (options.cluster.globalRank == 0) {
    ServerConfig config;
    config.bindEndpoint = tcpEndpoint(master_, options.cluster.masterPort);
    config.displayAddress = displayAddress(master_, options.cluster.masterPort);
    config.ipv6 = master_.ipv6;
    config.security = encrypted_ ? Security::kCurve : Security::kNone;
    config.keys = &keys_;
    config.worldSize = options.cluster.worldSize;
    config.version = options.version;
    config.config = options.config;
    config.rendezvousTimeout = options.settings.rendezvousTimeout;
    config.peerTimeout = options.settings.peerTimeout;
    config.heartbeatInterval = options.settings.heartbeatInterval();
    config.progressInterval = options.progressInterval;
    server_ = std::make_unique<RendezvousServer>(controlContext_, std::move(config));
  }
}

void ZmqSession::startClient(Hello hello) {
  ClientConfig config;
  config.serverEndpoint = tcpEndpoint(master_, options_.cluster.masterPort);
  config.displayAddress = displayAddress(master_, options_.cluster.masterPort);
  config.ipv6 = master_.ipv6;
  config.security = encrypted_ ? Security::kCurve : Security::kNone;
  config.keys = &keys_;
  config.hello = std::move(hello);
  config.rendezvousTimeout = options_.settings.rendezvousTimeout;
  config.peerTimeout = options_.settings.peerTimeout;
  config.heartbeatInterval = options_.settings.heartbeatInterval();
  client_ = std::make_unique<ControlClient>(controlContext_, std::move(config), health_);
}

ZmqSession::~ZmqSession() {
  client_.reset();  // goodbye first, so rank 0's server sees this rank leave
  server_.reset();  // waits (bounded) for the other ranks' goodbyes
  controlZap_.reset();
  zap_.reset();
}

}  // namespace hpu::comm::detail
