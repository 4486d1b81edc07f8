// The DeepSpeed configuration of HPUDeepSpeedStrategy: its init_args, a
// DeepSpeed config (a dict in the YAML, a JSON file, or the file named by
// PL_DEEPSPEED_CONFIG_PATH) and the Trainer's settings, merged and checked
// with DeepSpeed's rules. Unsupported keys are refused by name.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "hpu/env/environment.h"
#include "hpu/core/config/node.h"
#include "hpu/core/precision/loss_scaling.h"
#include "hpu/core/optim/lr_scheduler.h"

namespace hpu::core {

struct DeepSpeedSettings {
  int stage = 2;                    // zero_optimization.stage (0: plain data parallel)
  bool offload_optimizer = false;   // optimizer state (and gradient shards) in host memory
  bool offload_parameters = false;  // stage 3: parameter shards in host memory
  bool cpu_checkpointing = false;   // activation checkpoints in host memory
  bool partition_activations = false;
  std::int64_t reduce_bucket_elements = 0;  // zero_optimization.reduce_bucket_size (0: default)
  bool allow_untested_optimizer = false;
  // Batch rule: train_batch_size = micro x accumulation x world size.
  std::int64_t train_batch_size = 0;
  std::int64_t micro_batch_size = 0;
  std::int64_t gradient_accumulation_steps = 1;
  std::string precision;  // from bf16.enabled / fp16.enabled: "bf16-mixed", "16-mixed" or ""
  std::string communication_data_type;  // "fp32", "bf16", or "" (the model's: bf16 under bf16 or fp8)
  LossScalerOptions loss_scaler;  // fp16's loss_scale, initial_scale_power, loss_scale_window, hysteresis, min_loss_scale
  std::optional<double> gradient_clipping;
  std::optional<optim::WarmupDecayOptions> scheduler;
  std::string optimizer_type;  // the config's optimizer ("" for none): used only if nothing else configures one
  std::map<std::string, double> optimizer_params;
};

// `init_args`: the strategy's canonical init_args. `dataloader_batch` and
// `accumulate_grad_batches` come from the data module and the Trainer;
// `world_size` is devices x num_nodes. Throws ConfigError naming the key.
DeepSpeedSettings resolveDeepSpeed(const config::Node& init_args, const Environment& env,
                                   std::int64_t dataloader_batch, std::int64_t accumulate_grad_batches, int world_size);

// DeepSpeed-inference's tensor_parallel.tp_size in the config (1 when
// absent): generation split across that many ranks, as
// ModelParallelStrategy's tensor_parallel_size. Throws ConfigError naming
// the key.
int deepSpeedTensorParallelSize(const config::Node& init_args, const Environment& env);

}  // namespace hpu::core
