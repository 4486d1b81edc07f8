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
config::ComponentSchema environmentSchema(const std::string& name, const char* doc,
                                          std::vector<config::ParamSpec> params = {}) {
  return config::ComponentSchema{config::ComponentKind::kClusterEnvironment, name,
                                 "lightning.pytorch.plugins.environments", {name, "", std::move(params)}, doc};
}

// Lightning saves a checkpoint and requeues the job on SLURM's signal;
// hpu-train does neither, so it says so rather than take Lightning's
// default (true) and not act on it (lightning_interop_test.cc's
// kDefaultDiffers).
constexpr const char* kNoRequeue =
    "hpu-train does not save and requeue on SLURM's signal; requeue the job yourself (sbatch --requeue) and resume "
    "it from a checkpoint (ckpt_path)";

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
                      "srun: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, SLURM_JOB_NODELIST.",
                      {{"auto_requeue", config::Type::boolean(), "false",
                        "Save and requeue on the signal (Lightning's default: true).", kNoRequeue},
                       {"requeue_signal", config::Type::optional(config::Type::string()), "null",
                        "The signal that requeues (null: SIGUSR1).", kNoRequeue}}),
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
