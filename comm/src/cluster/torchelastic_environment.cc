// TorchElasticEnvironment: processes started by torchrun / torch.distributed
// launchers (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT). torchrun also sets GROUP_RANK, so LightningEnvironment, tried
// first, resolves those launches to the same place.
#include <spdlog/fmt/fmt.h>

#include "env_vars.h"
#include "hpu/comm/cluster_environment.h"
#include "hpu/comm/errors.h"

namespace hpu::comm {
namespace {

class TorchElasticEnvironment final : public ClusterEnvironment {
 public:
  std::string_view name() const override { return "TorchElasticEnvironment"; }

  bool detect(const Environment& env) const override {
    return env.contains("RANK") && env.contains("LOCAL_RANK") && env.contains("WORLD_SIZE");
  }

  ClusterInfo resolve(const Environment& env, const Topology& topology) const override {
    detail::checkTopology(topology);
    if (auto localWorldSize = detail::optionalCount(env, "LOCAL_WORLD_SIZE");
        localWorldSize && *localWorldSize != topology.devicesPerNode) {
      throw EnvError(fmt::format("LOCAL_WORLD_SIZE={} disagrees with trainer.devices={}; launch with "
                                 "torchrun --nproc_per_node={}",
                                 *localWorldSize, topology.devicesPerNode, topology.devicesPerNode));
    }
    return detail::resolveGloballyNumbered(
        env, topology,
        {name(), "RANK", "WORLD_SIZE", "LOCAL_RANK",
         "launch with torchrun --nnodes=<num_nodes> --nproc_per_node=<devices>"});
  }
};

}  // namespace

std::unique_ptr<ClusterEnvironment> makeTorchElasticEnvironment() {
  return std::make_unique<TorchElasticEnvironment>();
}

}  // namespace hpu::comm
