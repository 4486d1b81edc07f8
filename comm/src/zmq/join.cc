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
#if HPU_HAVE_MPI
#include "../mpi/mpi_collectives.h"
#endif

namespace hpu::comm {

namespace {

// Whether the collectives run on Open MPI (HPU_COLLECTIVES, comm_settings.h).
// Throws EnvError when mpi is asked for and cannot be had.
bool useMpi(const CommSettings& settings, const ClusterInfo& cluster) {
  const CollectivesBackend backend = settings.collectives;
  const bool startedByMpi = cluster.environment == "MPIEnvironment" || settings.startedByPmix;
  if (backend == CollectivesBackend::kZmq) return false;
  if (backend == CollectivesBackend::kAuto) return HPU_HAVE_MPI && startedByMpi;
  if (!HPU_HAVE_MPI)
    throw EnvError("HPU_COLLECTIVES=mpi: this build of hpu-train has no Open MPI; install libopenmpi-dev and build "
                   "again (CMake finds it), or use HPU_COLLECTIVES=zmq");
  if (!startedByMpi)
    throw EnvError(fmt::format("HPU_COLLECTIVES=mpi: rank {} was not started by mpirun (no OMPI_COMM_WORLD_RANK or "
                               "PMIX_RANK in its environment; the cluster environment is {}); launch with mpirun -np "
                               "{} -x MASTER_ADDR -x MASTER_PORT, or use HPU_COLLECTIVES=zmq",
                               cluster.globalRank, cluster.environment, cluster.worldSize));
  return true;
}

}  // namespace

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
  auto group = std::make_unique<ProcessGroup>(std::move(transport), std::move(store), options.settings.group);
  if (useMpi(options.settings, cluster)) {
#if HPU_HAVE_MPI
    group->useNativeCollectives(detail::makeMpiCollectives(cluster.globalRank, cluster.worldSize));
    if (cluster.globalRank == 0) spdlog::info("rank 0: collectives run on {}", group->nativeCollectivesName());
#endif
  }
  return group;
}

}  // namespace hpu::comm
