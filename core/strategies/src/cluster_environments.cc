// The cluster environments a config may name in trainer.plugins (or
// HPUParallelStrategy's cluster_environment) to force one instead of
// detecting it (comm/cluster_environment.h does the work).
#include <memory>
#include <string>
#include <vector>

#include "hpu/core/config/registry.h"

namespace hpu::core {
namespace {

struct ClusterEnvironmentChoice {};

// The schema of environment `name` (Lightning's class of that name).
config::ComponentSchema environmentSchema(const std::string& name, const char* doc) {
  return config::ComponentSchema{
      config::ComponentKind::kClusterEnvironment, name, "lightning.pytorch.plugins.environments", {name, "", {}}, doc};
}

std::unique_ptr<ClusterEnvironmentChoice> choose(const config::Params&) {
  return std::make_unique<ClusterEnvironmentChoice>();
}

HPU_REGISTER_COMPONENT(ClusterEnvironmentChoice,
                       environmentSchema("LightningEnvironment",
                                         "MASTER_ADDR, MASTER_PORT, NODE_RANK (GROUP_RANK), WORLD_SIZE, LOCAL_RANK."),
                       choose);
HPU_REGISTER_COMPONENT(
    ClusterEnvironmentChoice,
    environmentSchema("SLURMEnvironment",
                      "srun: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, SLURM_JOB_NODELIST."),
    choose);
HPU_REGISTER_COMPONENT(
    ClusterEnvironmentChoice,
    environmentSchema("MPIEnvironment",
                      "mpirun: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK."),
    choose);
HPU_REGISTER_COMPONENT(ClusterEnvironmentChoice,
                       environmentSchema("TorchElasticEnvironment",
                                         "torchrun: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE."),
                       choose);

}  // namespace
}  // namespace hpu::core
