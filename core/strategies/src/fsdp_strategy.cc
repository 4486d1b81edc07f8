// HPUFSDPStrategy (lightning-habana's; Lightning's FSDPStrategy runs as it):
// Fully Sharded Data Parallel's keys mapped onto the ZeRO sharding
// HPUDeepSpeedStrategy runs (fsdp_settings.h says what differs):
//   sharding_strategy  FULL_SHARD: ZeRO-3, SHARD_GRAD_OP: ZeRO-2, NO_SHARD:
//                      plain data parallel, HYBRID_SHARD / _HYBRID_SHARD_ZERO2:
//                      ZeRO-3 / ZeRO-2 within shard groups (a node, or
//                      device_mesh's), replicated across them
//   cpu_offload        ZeRO-Offload: optimizer state, gradient and parameter
//                      shards in host memory
//   auto_wrap_policy   the module classes that gather their parameters as a
//                      unit (FSDP's wrapped modules)
//   activation_checkpointing_policy  the module classes recomputed in backward
//   state_dict_type    full: one file with the whole optimizer state; sharded:
//                      each rank's shard in its own file
// Keys that configure what hpu-train always does one way, or does not
// emulate, take their default only and name why otherwise.
#include <spdlog/fmt/fmt.h>

#include "fsdp_settings.h"
#include "hpu/core/config/registry.h"
#include "trainer_part_param.h"

namespace hpu::core {
namespace {

using config::Type;

// The last component of each class path in a policy's value (a name or a
// list of them): the module classes it names.
std::vector<std::string> policyClasses(const config::Params& p, std::string_view key) {
  std::vector<std::string> out;
  if (!p.has(key)) return out;
  const config::Node& n = p.node(key);
  const auto add = [&](const std::string& path) { out.push_back(path.substr(path.rfind('.') + 1)); };
  if (n.isScalar()) {
    add(n.str());
  } else {
    for (const config::Node& item : n.items()) add(item.str());
  }
  return out;
}

FsdpSettings fsdpSettings(const config::Params& p) {
  FsdpSettings s;
  s.sharding_strategy = p.getString("sharding_strategy");
  const bool hybrid = s.sharding_strategy.find("HYBRID") != std::string::npos;
  s.stage = s.sharding_strategy == "NO_SHARD"                                                      ? 0
            : s.sharding_strategy == "SHARD_GRAD_OP" || s.sharding_strategy == "_HYBRID_SHARD_ZERO2" ? 2
                                                                                                     : 3;
  s.cpu_offload = p.has("cpu_offload") && p.getBool("cpu_offload");
  if (s.cpu_offload && s.stage == 0)
    p.fail("cpu_offload", "NO_SHARD keeps no shards to offload (FSDP offloads sharded parameters); use FULL_SHARD or "
                          "SHARD_GRAD_OP with cpu_offload, or NO_SHARD without it");
  if (p.has("device_mesh")) {
    const std::vector<std::int64_t> mesh = p.getIntList("device_mesh");
    if (!hybrid)
      p.fail("device_mesh", fmt::format("[replicas, shard size] shapes the groups of HYBRID_SHARD and "
                                        "_HYBRID_SHARD_ZERO2; {} shards over every rank: leave it null",
                                        s.sharding_strategy));
    if (mesh.size() != 2 || mesh[0] < 1 || mesh[1] < 1)
      p.fail("device_mesh", "give two sizes, [replicas, shard size] (Lightning's (replicate, shard) tuple)");
    s.replica_count = static_cast<int>(mesh[0]);
    s.shard_group_size = static_cast<int>(mesh[1]);
  } else if (hybrid) {
    s.shard_group_size = -1;  // a node's devices, torch's default for a hybrid policy
  }
  s.whole_optimizer_state = p.getString("state_dict_type") == "full";
  s.wrap_classes = policyClasses(p, "auto_wrap_policy");
  s.recompute_classes = policyClasses(p, "activation_checkpointing_policy");
  if (p.has("activation_checkpointing")) {
    if (!s.recompute_classes.empty())
      p.fail("activation_checkpointing", "You cannot set both `activation_checkpointing` and "
                                         "`activation_checkpointing_policy`. Use the latter.");
    s.recompute_classes = policyClasses(p, "activation_checkpointing");
  }
  return s;
}

constexpr const char* kPrecisionFromTrainer =
    "hpu-train derives FSDP's mixed precision from trainer.precision, as Lightning's FSDPPrecision does (bf16-mixed: "
    "fp32 parameters, bf16 compute and gradient reduction; bf16-true: everything bf16); set trainer.precision";
constexpr const char* kOwnGroups =
    "hpu-train forms the shard groups itself: sharding_strategy HYBRID_SHARD with device_mesh [replicas, shard size]";
constexpr const char* kNoPrefetch =
    "hpu-train gathers a unit's parameters when its forward (or backward) starts, one unit at a time, without "
    "prefetching the next";

std::vector<config::ParamSpec> fsdpParams() {
  const auto policy = Type::optional(Type::anyOf({Type::string(), Type::list(Type::string())}));
  // An object FSDP takes that hpu-train has no counterpart of: null only, another value refused with the reason.
  const auto object = Type::optional(Type::anyOf({Type::string(), Type::dict(), Type::list(Type::string())}));
  // lightning-habana's order (strategies/fsdp.py), then Lightning's
  // device_mesh, then FullyShardedDataParallel's keyword arguments, which
  // FSDPStrategy passes on and LightningCLI does not list (hence own: a
  // printed config never holds them), refused with their reasons.
  return {trainerPartParam("accelerator", "trainer.accelerator"),
          {"parallel_devices", Type::optional(Type::list(Type::string())), "null",
           "Devices to use (their count must match trainer.devices)."},
          clusterEnvironmentParam(),
          trainerPartParam("checkpoint_io", "trainer.plugins (HPUCheckpointIO)"),
          trainerPartParam("precision_plugin", "trainer.precision or trainer.plugins (HPUFSDPPrecision)"),
          {"process_group_backend", Type::optional(Type::string({"hccl"})), "hccl",
           "Collective backend (HCCL on HPU, which hpu-train's collectives emulate)."},
          {"timeout", Type::optional(Type::string()), "0:30:00", "Collective timeout.",
           "collectives wait under hpu-train's own deadlines (HPU_COLLECTIVE_TIMEOUT)"},
          {"cpu_offload", Type::optional(Type::boolean()), "null",
           "Keep the sharded parameters, their gradients and the optimizer state in host memory, the optimizer step "
           "on the host (ZeRO-Offload)."},
          {"mixed_precision", Type::optional(Type::anyOf({Type::dict(), Type::string()})), "null",
           "FSDP's MixedPrecision (param, reduce and buffer dtypes).", kPrecisionFromTrainer},
          {"auto_wrap_policy", policy, "null",
           "Module classes (class paths or names, e.g. [LlamaDecoderLayer]) whose modules gather their parameters "
           "together around their forward and backward, the rest of the model with the root for the whole step "
           "(null: every module gathers its own)."},
          {"activation_checkpointing", policy, "null",
           "Deprecated by Lightning: activation_checkpointing_policy's classes."},
          {"activation_checkpointing_policy", policy, "null",
           "Module classes whose modules' activations are recomputed in backward instead of kept."},
          {"sharding_strategy",
           Type::string({"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "_HYBRID_SHARD_ZERO2"}),
           "FULL_SHARD",
           "FULL_SHARD: parameters, gradients and optimizer state sharded (ZeRO-3); SHARD_GRAD_OP: gradients and "
           "optimizer state (ZeRO-2); NO_SHARD: nothing (DDP); HYBRID_SHARD, _HYBRID_SHARD_ZERO2: FULL_SHARD, "
           "SHARD_GRAD_OP within each node (or device_mesh's shard groups), replicated across them."},
          {"state_dict_type", Type::string({"full", "sharded"}), "full",
           "Checkpoints: full, the whole model and optimizer state in one file; sharded, each rank's optimizer shard "
           "in a file of its own beside it (X.ckpt.rank<R>)."},
          {"device_mesh", Type::optional(Type::list(Type::integer())), "null",
           "HYBRID_SHARD's [replicas, shard size] (null: shard within each node, replicate across nodes)."},
          {"process_group", object, "null", "FSDP's process group(s).", kOwnGroups, true},
          {"limit_all_gathers", Type::boolean(), "true", "Rate-limit all-gathers in flight.", kNoPrefetch, true},
          {"forward_prefetch", Type::boolean(), "false", "Prefetch the next unit's all-gather in forward.", kNoPrefetch, true},
          {"backward_prefetch", Type::optional(Type::string({"BACKWARD_PRE", "BACKWARD_POST"})), "null",
           "Prefetch the next unit's all-gather in backward.", kNoPrefetch, true},
          {"use_orig_params", Type::boolean(), "true", "The optimizer sees the original parameters.",
           "hpu-train's optimizer always steps the original parameters (by name, in checkpoints too)", true},
          {"sync_module_states", Type::boolean(), "true", "Broadcast rank 0's parameters and buffers at setup.",
           "hpu-train always starts every rank from rank 0's parameters and buffers", true},
          {"ignored_modules", object, "null", "Modules FSDP leaves unsharded.",
           "every trainable parameter is sharded; frozen ones stay whole on every rank", true},
          {"param_init_fn", object, "null", "How to initialise parameters on the meta device.",
           "a ZeRO-3 model is built in host memory and sharded as it reaches the devices", true},
          {"device_id", object, "null", "The device of this rank.", "each rank drives the device of its local rank", true}};
}

HPU_REGISTER_COMPONENT(
    Strategy,
    config::ComponentSchema{config::ComponentKind::kStrategy,
                            "HPUFSDPStrategy",
                            "lightning_habana",
                            {"HPUFSDPStrategy", "", fsdpParams()},
                            "Fully Sharded Data Parallel: ZeRO-3 (or 2, 0, hybrid) under Lightning's FSDP keys.",
                            {"lightning.pytorch.strategies.FSDPStrategy"}},
    [](const config::Params& p) -> std::unique_ptr<Strategy> { return makeFsdpStrategy(p.values(), fsdpSettings(p)); });

}  // namespace
}  // namespace hpu::core
