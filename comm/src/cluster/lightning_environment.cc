// LightningEnvironment: the per-node launch of the lightning-habana docs
//   MASTER_ADDR=... MASTER_PORT=... NODE_RANK=1 WORLD_SIZE=16 hpu-train fit ...
// and the workers our own launcher starts (LOCAL_RANK set). Unset values fall
// back to a single node: NODE_RANK 0, LOCAL_RANK 0, MASTER_ADDR 127.0.0.1 and
// a port the launcher picks.
#include <spdlog/fmt/fmt.h>

#include "env_vars.h"
#include "hpu/comm/cluster_environment.h"
#include "hpu/comm/errors.h"

namespace hpu::comm {
namespace {

class LightningEnvironment final : public ClusterEnvironment {
 public:
  std::string_view name() const override { return "LightningEnvironment"; }

  bool detect(const Environment& env) const override {
    return env.contains("NODE_RANK") || env.contains("GROUP_RANK");
  }

  ClusterInfo resolve(const Environment& env, const Topology& topology) const override {
    detail::checkTopology(topology);
    ClusterInfo info;
    info.environment = std::string(name());
    info.numNodes = topology.numNodes;
    info.localWorldSize = topology.devicesPerNode;

    const std::string_view nodeVar = env.contains("NODE_RANK") ? "NODE_RANK" : "GROUP_RANK";
    info.nodeRank = detail::optionalCount(env, nodeVar).value_or(0);
    detail::checkBelow(nodeVar, info.nodeRank, topology.numNodes, "trainer.num_nodes");

    auto localRank = detail::optionalCount(env, "LOCAL_RANK");
    info.createsProcessesExternally = localRank.has_value();
    info.localRank = localRank.value_or(0);
    detail::checkBelow("LOCAL_RANK", info.localRank, topology.devicesPerNode, "trainer.devices");

    info.worldSize = topology.numNodes * topology.devicesPerNode;
    if (auto worldSize = detail::optionalCount(env, "WORLD_SIZE")) {
      std::string hint;
      if (*worldSize > 0 && *worldSize % topology.devicesPerNode == 0) {
        hint = fmt::format("for {} processes set trainer.num_nodes={}", *worldSize, *worldSize / topology.devicesPerNode);
      }
      detail::checkWorldSize("WORLD_SIZE", *worldSize, topology, hint);
    }
    info.globalRank = info.nodeRank * topology.devicesPerNode + info.localRank;

    const bool multiNode = topology.numNodes > 1;
    if (auto addr = detail::optionalNonEmpty(env, "MASTER_ADDR")) {
      info.masterAddr = *addr;
    } else if (multiNode) {
      throw EnvError(fmt::format(
          "MASTER_ADDR is not set but trainer.num_nodes={}; set it on every node to the address of the node with "
          "NODE_RANK=0 (rank 0 listens on exactly that address)",
          topology.numNodes));
    }
    if (auto port = detail::optionalPort(env, "MASTER_PORT")) {
      info.masterPort = *port;
    } else if (info.worldSize > 1 && (multiNode || info.createsProcessesExternally)) {
      throw EnvError(fmt::format(
          "MASTER_PORT is not set but {} processes were started separately; set the same free port on every {}",
          info.worldSize, multiNode ? "node" : "process"));
    }
    return info;
  }
};

}  // namespace

std::unique_ptr<ClusterEnvironment> makeLightningEnvironment() { return std::make_unique<LightningEnvironment>(); }

}  // namespace hpu::comm
