// What HPUFSDPStrategy (fsdp_strategy.cc: Lightning's FSDPStrategy and its
// keys) changes in the ZeRO data parallelism HPUDeepSpeedStrategy runs
// (deepspeed_strategy.cc): FSDP's sharding strategies are ZeRO's stages
// under Lightning's names, its precision Lightning's FSDPPrecision (the
// trainer's weights, gradients reduced in the precision's reduce dtype), its
// checkpoints Lightning's state_dict_type, its wrap policy the modules that
// gather their parameters together.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hpu/core/config/node.h"
#include "hpu/core/strategies/strategy.h"

namespace hpu::core {

struct FsdpSettings {
  std::string sharding_strategy = "FULL_SHARD";  // Lightning's name, as the strategy reports it
  // ZeRO stage: FULL_SHARD and HYBRID_SHARD 3, SHARD_GRAD_OP and
  // _HYBRID_SHARD_ZERO2 2, NO_SHARD 0.
  int stage = 3;
  // Optimizer state and gradient shards (at stage 3 parameter shards too)
  // in host memory, the optimizer step on the host.
  bool cpu_offload = false;
  // HYBRID_SHARD: shards within groups of this many consecutive ranks, each
  // group a replica of the others (gradients averaged over the replicas
  // too); -1: the devices per node; 0: one group of every rank.
  int shard_group_size = 0;
  // device_mesh's replicas, checked against the world size at setup (0:
  // world / shard_group_size).
  int replica_count = 0;
  // state_dict_type full: a checkpoint holds the whole optimizer state in
  // the one file rank 0 writes; sharded: each rank's shard in its own file.
  bool whole_optimizer_state = true;
  // auto_wrap_policy's classes (Module::typeName): each such module gathers
  // its subtree's parameters around its forward and backward, the rest of
  // the model its root's, for the whole step, as FSDP's units; empty: every
  // module gathers its own (DeepSpeed ZeRO-3's granularity).
  std::vector<std::string> wrap_classes;
  // activation_checkpointing_policy's classes: modules recomputed in backward.
  std::vector<std::string> recompute_classes;
};

// `init_args`: HPUFSDPStrategy's canonical init_args (parallel_devices and
// cluster_environment are read from them).
std::unique_ptr<Strategy> makeFsdpStrategy(config::Node init_args, FsdpSettings fsdp);

}  // namespace hpu::core
