// Cluster environments: how a launch tells this process where it sits in the
// job. Each one recognises its launcher's variables (detect) and turns them
// into a validated ClusterInfo (resolve). They are tried in this order:
//
//   LightningEnvironment     NODE_RANK (or GROUP_RANK), MASTER_ADDR, MASTER_PORT,
//                            WORLD_SIZE, LOCAL_RANK: per-node launch as in the
//                            lightning-habana docs; also the fallback when no
//                            environment is detected (one node, our launcher).
//   SLURMEnvironment         SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID,
//                            first host of SLURM_JOB_NODELIST (srun).
//   MPIEnvironment           OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK (mpirun).
//   TorchElasticEnvironment  RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE (torchrun).
//
// WORLD_SIZE counts processes (num_nodes x devices). Every invalid value
// raises EnvError naming the variable and its value, before any socket opens.
// The core registers the factories below in its component registry by name().
// Thread-safety: environments are stateless; all functions are reentrant.
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "hpu/comm/cluster_info.h"
#include "hpu/env/environment.h"

namespace hpu::comm {

class ClusterEnvironment {
 public:
  virtual ~ClusterEnvironment() = default;
  // Stable registry name, e.g. "SLURMEnvironment".
  virtual std::string_view name() const = 0;
  // True when `env` carries this launcher's variables.
  virtual bool detect(const Environment& env) const = 0;
  // Validates the variables against `topology` and returns this process's place.
  // REQUIRES: topology.devicesPerNode >= 1 and topology.numNodes >= 1.
  // Throws EnvError naming the variable and value when one is invalid.
  virtual ClusterInfo resolve(const Environment& env, const Topology& topology) const = 0;
};

std::unique_ptr<ClusterEnvironment> makeLightningEnvironment();
std::unique_ptr<ClusterEnvironment> makeSlurmEnvironment();
std::unique_ptr<ClusterEnvironment> makeMpiEnvironment();
std::unique_ptr<ClusterEnvironment> makeTorchElasticEnvironment();

struct ClusterEnvironmentFactory {
  std::string_view name;
  std::unique_ptr<ClusterEnvironment> (*make)();
};

// Every environment, in detection order.
std::span<const ClusterEnvironmentFactory> clusterEnvironments();

// The first environment whose detect() holds, else LightningEnvironment.
std::unique_ptr<ClusterEnvironment> detectClusterEnvironment(const Environment& env);

// detectClusterEnvironment(env)->resolve(env, topology).
ClusterInfo resolveClusterInfo(const Environment& env, const Topology& topology);

}  // namespace hpu::comm
