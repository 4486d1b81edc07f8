#include "hpu/comm/cluster_environment.h"

#include <array>

namespace hpu::comm {
namespace {

constexpr std::array<ClusterEnvironmentFactory, 4> kEnvironments{{
    {"LightningEnvironment", &makeLightningEnvironment},
    {"SLURMEnvironment", &makeSlurmEnvironment},
    {"MPIEnvironment", &makeMpiEnvironment},
    {"TorchElasticEnvironment", &makeTorchElasticEnvironment},
}};

}  // namespace

std::span<const ClusterEnvironmentFactory> clusterEnvironments() { return kEnvironments; }

std::unique_ptr<ClusterEnvironment> detectClusterEnvironment(const Environment& env) {
  for (const auto& factory : kEnvironments) {
    auto environment = factory.make();
    if (environment->detect(env)) return environment;
  }
  return makeLightningEnvironment();
}

ClusterInfo resolveClusterInfo(const Environment& env, const Topology& topology) {
  return detectClusterEnvironment(env)->resolve(env, topology);
}

}  // namespace hpu::comm
