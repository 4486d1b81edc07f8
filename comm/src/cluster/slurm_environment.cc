// SLURMEnvironment: every process started by srun (--ntasks-per-node =
// trainer.devices). MASTER_ADDR / MASTER_PORT win when set; otherwise rank 0
// is the first host of SLURM_JOB_NODELIST and the port is 15000 + the last
// four digits of SLURM_JOB_ID (as Lightning does).
#include <spdlog/fmt/fmt.h>

#include "env_vars.h"
#include "hpu/comm/cluster_environment.h"
#include "hpu/comm/errors.h"
#include "hpu/comm/slurm_nodelist.h"

namespace hpu::comm {
namespace {

class SlurmEnvironment final : public ClusterEnvironment {
 public:
  std::string_view name() const override { return "SLURMEnvironment"; }

  // Interactive allocations (salloc shells, `srun --pty bash`) carry SLURM
  // variables of the shell, not of a training task; Lightning ignores them too.
  bool detect(const Environment& env) const override {
    if (!env.contains("SLURM_NTASKS") || !env.contains("SLURM_PROCID")) return false;
    auto jobName = env.get("SLURM_JOB_NAME");
    return !(jobName == "bash" || jobName == "interactive");
  }

  ClusterInfo resolve(const Environment& env, const Topology& topology) const override {
    detail::checkTopology(topology);
    ClusterInfo info;
    info.environment = std::string(name());
    info.createsProcessesExternally = true;
    info.numNodes = topology.numNodes;
    info.localWorldSize = topology.devicesPerNode;
    info.worldSize = detail::requiredCount(env, "SLURM_NTASKS", name());
    detail::checkWorldSize("SLURM_NTASKS", info.worldSize, topology,
                           fmt::format("launch with srun --nodes={} --ntasks-per-node={}", topology.numNodes,
                                       topology.devicesPerNode));
    info.globalRank = detail::requiredCount(env, "SLURM_PROCID", name());
    detail::checkBelow("SLURM_PROCID", info.globalRank, info.worldSize, "SLURM_NTASKS");
    info.localRank = detail::requiredCount(env, "SLURM_LOCALID", name());
    detail::checkBelow("SLURM_LOCALID", info.localRank, topology.devicesPerNode, "trainer.devices");
    info.nodeRank = detail::requiredCount(env, "SLURM_NODEID", name());
    detail::checkBelow("SLURM_NODEID", info.nodeRank, topology.numNodes, "trainer.num_nodes");

    if (auto addr = detail::optionalNonEmpty(env, "MASTER_ADDR")) {
      info.masterAddr = *addr;
    } else if (auto list = env.get("SLURM_JOB_NODELIST")) {
      info.masterAddr = firstHostOfNodeList(*list, "SLURM_JOB_NODELIST");
    } else if (auto legacy = env.get("SLURM_NODELIST")) {
      info.masterAddr = firstHostOfNodeList(*legacy, "SLURM_NODELIST");
    } else {
      throw EnvError("neither MASTER_ADDR nor SLURM_JOB_NODELIST is set; SLURMEnvironment needs one to find rank 0");
    }
    if (auto port = detail::optionalPort(env, "MASTER_PORT")) {
      info.masterPort = *port;
    } else {
      const int jobId = detail::requiredCount(env, "SLURM_JOB_ID", "SLURMEnvironment (to derive MASTER_PORT)");
      info.masterPort = 15000 + jobId % 10000;
    }
    return info;
  }
};

}  // namespace

std::unique_ptr<ClusterEnvironment> makeSlurmEnvironment() { return std::make_unique<SlurmEnvironment>(); }

}  // namespace hpu::comm
