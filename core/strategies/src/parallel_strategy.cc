// HPUParallelStrategy (hpu_parallel): data-parallel training, one process
// per device, as DDP.
//  - The job: the cluster environment resolves this process's place; with
//    trainer.devices = N and nothing else starting processes, this process is
//    local rank 0 and launches local ranks 1..N-1; every rank joins the
//    ZeroMQ rendezvous (comm/rendezvous.h).
//  - Parameters: rank 0's values are broadcast at setup, buffers too.
//  - Gradients: each bucket is all-reduced (mean) as soon as its last
//    gradient is final in backward, overlapping the rest of backward;
//    gradient-accumulation steps that do not step the optimizer skip it
//    (no_sync).
//  - Data: one seeded permutation per epoch split across ranks.
//  - Metrics: epoch means are combined from every rank's sums.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "bucket_allreduce.h"
#include "distributed_strategy.h"
#include "hpu/core/config/registry.h"
#include "trainer_part_param.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/strategies/strategy.h"

namespace hpu::core {
namespace {

class ParallelStrategy final : public DistributedStrategy {
 public:
  ParallelStrategy(std::int64_t bucket_cap_bytes, std::string cluster_environment)
      : DistributedStrategy(std::move(cluster_environment)), bucket_cap_bytes_(bucket_cap_bytes) {}

  std::string name() const override { return "HPUParallelStrategy"; }
  std::int64_t bucketCapBytes() const override { return bucket_cap_bytes_; }

  void setupParameters(nn::Module&, nn::FlatParameters& params, const std::vector<nn::NamedTensor>& buffers) override {
    broadcastParameters(params, buffers);
    sync_.setup(params);
  }
  void beforeBackward(nn::FlatParameters& params, MicroBatch m) override { sync_.beforeBackward(group(), params, m); }
  void afterBackward(nn::FlatParameters& params, MicroBatch m) override { sync_.afterBackward(group(), params, m); }

 private:
  std::int64_t bucket_cap_bytes_;
  BucketAllreduce sync_;
};

constexpr const char* kOneDevicePerProcess = "each process drives one device, as DDP does with one device per process";
constexpr const char* kOwnBuckets =
    "DistributedDataParallel's option; hpu-train all-reduces its own gradient buckets, overlapping backward";

HPU_REGISTER_COMPONENT(
    Strategy,
    config::ComponentSchema{
        config::ComponentKind::kStrategy,
        "HPUParallelStrategy",
        "lightning_habana",
        {"HPUParallelStrategy",
         "",
         {trainerPartParam("accelerator", "trainer.accelerator"),
          trainerPartParam("parallel_devices", "trainer.devices"),
          clusterEnvironmentParam(),
          trainerPartParam("checkpoint_io", "trainer.plugins (HPUCheckpointIO)"),
          trainerPartParam("precision_plugin", "trainer.precision or trainer.plugins (HPUPrecisionPlugin)"),
          {"ddp_comm_state", config::Type::null(), "null", "DDP communication hook state (none on HPU)."},
          {"ddp_comm_hook", config::Type::null(), "null", "DDP communication hook (none on HPU)."},
          {"ddp_comm_wrapper", config::Type::null(), "null", "DDP communication hook wrapper (none on HPU)."},
          {"model_averaging_period", config::Type::null(), "null", "Post-local SGD averaging period (not on HPU)."},
          {"process_group_backend", config::Type::string({"hccl"}), "hccl", "Collective backend.",
           "HPUs communicate through HCCL, which hpu-train's collectives emulate"},
          // DistributedDataParallel's keyword arguments.
          {"bucket_cap_mb", config::Type::optional(config::Type::real().min(0.0, true)), "null",
           "Gradient bucket size (MiB) for all-reduce (null: 25, torch's default)."},
          {"find_unused_parameters", config::Type::boolean(), "false",
           "Parameters without a gradient in a step are found every step (they get zeros), whatever this says."},
          // DDPStrategy's own and the rest of DistributedDataParallel's
          // (torch 2.13), as LightningCLI lists them: their defaults only.
          {"timeout", config::Type::optional(config::Type::string()), "0:30:00", "Collective timeout.",
           "collectives wait under hpu-train's own deadlines (comm's barrier and store timeouts)"},
          {"start_method", config::Type::string({"popen", "spawn", "fork", "forkserver"}), "popen",
           "How local ranks start.", "hpu-train's launcher starts every local rank as a process of its own"},
          {"output_device", config::Type::null(), "null", "DDP output device.", kOneDevicePerProcess},
          {"dim", config::Type::integer(), "0", "DDP scatter dimension.", kOneDevicePerProcess},
          {"broadcast_buffers", config::Type::null(), "null", "DDP buffer broadcast.", kOwnBuckets},
          {"init_sync", config::Type::boolean(), "true", "DDP's initial parameter sync.", kOwnBuckets},
          {"process_group", config::Type::null(), "null", "DDP process group.", kOwnBuckets},
          {"check_reduction", config::Type::boolean(), "false", "Deprecated DDP check.", kOwnBuckets},
          {"gradient_as_bucket_view", config::Type::boolean(), "false", "Gradients as views of the buckets.",
           kOwnBuckets},
          {"static_graph", config::Type::boolean(), "false", "DDP static graph.", kOwnBuckets},
          {"delay_all_reduce_named_params", config::Type::null(), "null", "DDP delayed all-reduce.", kOwnBuckets},
          {"param_to_hook_all_reduce", config::Type::null(), "null", "DDP hooked all-reduce.", kOwnBuckets},
          {"mixed_precision", config::Type::null(), "null", "DDP's mixed precision.",
           "precision is trainer.precision's (the precision plugin), not DDP's"},
          {"device_mesh", config::Type::null(), "null", "DDP device mesh.", kOwnBuckets},
          {"skip_all_reduce_unused_params", config::Type::boolean(), "false", "DDP unused-parameter all-reduce.",
           kOwnBuckets},
          {"bucket_cap_mb_list", config::Type::null(), "null", "DDP per-bucket sizes.", kOwnBuckets},
          {"batched_grad_copy", config::Type::boolean(), "false", "DDP batched gradient copy.", kOwnBuckets},
          {"forward_sync_buffers", config::Type::null(), "null", "DDP buffer sync in forward.", kOwnBuckets}}},
        "Data-parallel training over processes and nodes (strategy: hpu_parallel).",
        {"lightning.pytorch.strategies.DDPStrategy", "lightning_habana.HPUDDPStrategy"}},
    [](const config::Params& p) {
      return makeParallelStrategy(static_cast<std::int64_t>((p.has("bucket_cap_mb") ? p.getFloat("bucket_cap_mb") : 25.0) * 1024 * 1024),
                                  p.has("cluster_environment") ? p.getString("cluster_environment") : "");
    });

}  // namespace

std::unique_ptr<Strategy> makeParallelStrategy(std::int64_t bucket_cap_bytes, const std::string& cluster_environment) {
  return std::make_unique<ParallelStrategy>(bucket_cap_bytes, cluster_environment);
}

}  // namespace hpu::core
