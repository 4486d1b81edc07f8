#include "hpu/core/strategies/strategy_names.h"

#include <algorithm>

namespace hpu::core {

std::span<const StrategyName> strategyNames() {
  using F = StrategyFamily;
  static constexpr StrategyName kNames[] = {
      {"auto", F::kAuto},
      {"hpu_single", F::kSingleDevice},
      {"hpu_parallel", F::kParallel},
      {"hpu_deepspeed", F::kDeepSpeed, 2},  // DeepSpeed's default stage
      {"hpu_deepspeed_stage_1", F::kDeepSpeed, 1},
      {"hpu_deepspeed_stage_2", F::kDeepSpeed, 2},
      {"hpu_deepspeed_stage_2_offload", F::kDeepSpeed, 2, true},
      {"hpu_deepspeed_stage_3", F::kDeepSpeed, 3},
      {"hpu_deepspeed_stage_3_offload", F::kDeepSpeed, 3, true},
      {"hpu_fsdp", F::kFSDP},
      {"hpu_fsdp_cpu_offload", F::kFSDP, 0, true},  // hpu-train's own: Lightning's fsdp_cpu_offload
  };
  return kNames;
}

const StrategyName* findStrategyName(std::string_view name) {
  const auto names = strategyNames();
  const auto it = std::find_if(names.begin(), names.end(), [&](const StrategyName& n) { return n.name == name; });
  return it == names.end() ? nullptr : &*it;
}

std::span<const GpuStrategyName> gpuStrategyNames() {
  static constexpr GpuStrategyName kNames[] = {
      {"ddp", "hpu_parallel"},
      {"ddp_spawn", "hpu_parallel"},
      {"ddp_fork", "hpu_parallel"},
      {"ddp_notebook", "hpu_parallel"},
      {"ddp_find_unused_parameters_true", "hpu_parallel"},
      {"ddp_find_unused_parameters_false", "hpu_parallel"},
      {"deepspeed", "hpu_deepspeed"},
      {"deepspeed_stage_1", "hpu_deepspeed_stage_1"},
      {"deepspeed_stage_2", "hpu_deepspeed_stage_2"},
      {"deepspeed_stage_2_offload", "hpu_deepspeed_stage_2_offload"},
      {"deepspeed_stage_3", "hpu_deepspeed_stage_3"},
      {"deepspeed_stage_3_offload", "hpu_deepspeed_stage_3_offload"},
      {"fsdp", "hpu_fsdp"},
      {"fsdp_cpu_offload", "hpu_fsdp_cpu_offload", "hpu-train's name for it: lightning-habana registers none"},
  };
  return kNames;
}

std::vector<std::string> strategyNameList() {
  std::vector<std::string> out;
  for (const StrategyName& n : strategyNames()) out.emplace_back(n.name);
  return out;
}

}  // namespace hpu::core
