// MPIEnvironment: every process started by Open MPI's mpirun. Pass
// MASTER_ADDR / MASTER_PORT with `mpirun -x`.
#include "env_vars.h"
#include "hpu/comm/cluster_environment.h"

namespace hpu::comm {
namespace {

class MpiEnvironment final : public ClusterEnvironment {
 public:
  std::string_view name() const override { return "MPIEnvironment"; }

  bool detect(const Environment& env) const override {
    return env.contains("OMPI_COMM_WORLD_RANK") && env.contains("OMPI_COMM_WORLD_SIZE");
  }

  ClusterInfo resolve(const Environment& env, const Topology& topology) const override {
    return detail::resolveGloballyNumbered(
        env, topology,
        {name(), "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
         "launch with mpirun -np <num_nodes x devices> --map-by slot -x MASTER_ADDR -x MASTER_PORT"});
  }
};

}  // namespace

std::unique_ptr<ClusterEnvironment> makeMpiEnvironment() { return std::make_unique<MpiEnvironment>(); }

}  // namespace hpu::comm
