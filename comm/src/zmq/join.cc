#include <unistd.h>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "../check.h"
#include "hpu/comm/errors.h"
#include "hpu/comm/in_memory.h"
#include "hpu/comm/rendezvous.h"
#include "net.h"
#include "session.h"
#include "zmq_store.h"
#include "zmq_transport.h"

namespace hpu::comm {

std::unique_ptr<ProcessGroup> joinProcessGroup(const JoinOptions& options) {
  const ClusterInfo& cluster = options.cluster;
  if (cluster.worldSize == 1) return std::move(makeInMemoryProcessGroups(1, options.settings.group).front());
  HPU_COMM_CHECK(cluster.masterPort != 0, "a multi-process job needs MASTER_PORT (the launcher picks one)");
  const auto start = std::chrono::steady_clock::now();
  const detail::ResolvedAddress master = detail::resolveHost(cluster.masterAddr, "MASTER_ADDR");
  if (options.token.empty() && !master.loopback) {
    throw EnvError(fmt::format("HPU_JOB_TOKEN (or HPU_JOB_TOKEN_FILE) is required: MASTER_ADDR={} is not a loopback "
                               "address, so the rendezvous is reachable from other machines; give every node the same "
                               "secret, e.g. HPU_JOB_TOKEN=$(head -c 24 /dev/urandom | base64)",
                               cluster.masterAddr));
  }
  if (options.token.empty() && cluster.globalRank == 0) {
    spdlog::warn("rank 0: no HPU_JOB_TOKEN is set: any local process can join the rendezvous on {}:{}; set "
                 "HPU_JOB_TOKEN on every rank to restrict it",
                 master.ip, cluster.masterPort);
  }

  auto session = std::make_shared<detail::ZmqSession>(options, master);
  auto transport = std::make_unique<detail::ZmqTransport>(session, cluster.globalRank, cluster.worldSize,
                                                          detail::localAddressFacing(master));
  detail::Hello hello;
  hello.rank = static_cast<std::uint32_t>(cluster.globalRank);
  hello.worldSize = static_cast<std::uint32_t>(cluster.worldSize);
  hello.nodeRank = static_cast<std::uint32_t>(cluster.nodeRank);
  hello.localRank = static_cast<std::uint32_t>(cluster.localRank);
  hello.pid = static_cast<std::uint32_t>(::getpid());
  hello.version = options.version;
  hello.configDigest = options.config.digest();
  hello.config = options.config;
  hello.hostname = detail::hostName();
  hello.hostId = detail::hostIdentity();
  hello.endpoints = transport->endpoints();
  session->startClient(std::move(hello));

  const auto deadline = start + options.settings.rendezvousTimeout;
  transport->connectPeers(session->client().awaitWelcome(deadline), deadline);
  auto store = detail::makeZmqStore(session);
  return std::make_unique<ProcessGroup>(std::move(transport), std::move(store), options.settings.group);
}

}  // namespace hpu::comm
