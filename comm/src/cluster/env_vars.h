// Reading and validating cluster variables; every failure is an EnvError
// that names the variable and its value. Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "hpu/comm/cluster_info.h"
#include "hpu/env/environment.h"

namespace hpu::comm::detail {

// A non-negative integer variable, or nullopt when unset.
// Throws EnvError when it is set but not a non-negative integer.
std::optional<int> optionalCount(const Environment& env, std::string_view name);

// Like optionalCount, but a missing variable is an EnvError saying that
// `environment` needs it.
int requiredCount(const Environment& env, std::string_view name, std::string_view environment);

// MASTER_PORT (1..65535), or nullopt when unset.
std::optional<int> optionalPort(const Environment& env, std::string_view name);

// A non-empty string variable, or nullopt when unset. Empty is an EnvError.
std::optional<std::string> optionalNonEmpty(const Environment& env, std::string_view name);

// Throws EnvError unless value < limit: "NODE_RANK=2 is out of range for
// trainer.num_nodes=2; valid values are 0..1".
void checkBelow(std::string_view name, int value, int limit, std::string_view limitName);

// Throws EnvError unless worldSize == numNodes x devicesPerNode; `hint` says
// how to launch correctly with this launcher.
void checkWorldSize(std::string_view name, int worldSize, const Topology& topology, std::string_view hint);

// REQUIRES-style check of the trainer's numbers (a bug in the caller when violated).
void checkTopology(const Topology& topology);

}  // namespace hpu::comm::detail

namespace hpu::comm::detail {

// The variable names of a launcher that starts every process itself and
// numbers them globally (mpirun, torchrun).
struct RankVariables {
  std::string_view environment;  // "MPIEnvironment"
  std::string_view rank;         // "OMPI_COMM_WORLD_RANK"
  std::string_view worldSize;    // "OMPI_COMM_WORLD_SIZE"
  std::string_view localRank;    // "OMPI_COMM_WORLD_LOCAL_RANK"
  std::string_view launchHint;   // "launch with mpirun -np {world} --map-by slot"
};

// Resolves a globally numbered launch: node rank = rank / devices, which
// needs ranks placed by node (local rank = rank % devices). MASTER_ADDR
// defaults to 127.0.0.1 on one node; MASTER_PORT is required when there is
// more than one process, since separately started processes cannot agree on
// a free port.
ClusterInfo resolveGloballyNumbered(const Environment& env, const Topology& topology, const RankVariables& vars);

}  // namespace hpu::comm::detail
