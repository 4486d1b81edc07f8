// The names trainer.strategy accepts as plain strings (Lightning's registry
// names, beside the class paths): the one table that the config schema,
// --help, errors and the selection of a strategy read.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hpu::core {

enum class StrategyFamily {
  kAuto,          // hpu_single for one device in the job, else hpu_parallel
  kSingleDevice,  // SingleHPUStrategy
  kParallel,      // HPUParallelStrategy
  kDeepSpeed,     // HPUDeepSpeedStrategy
  kFSDP,          // HPUFSDPStrategy
};

struct StrategyName {
  std::string_view name;
  StrategyFamily family;
  int zero_stage = 0;    // kDeepSpeed: the ZeRO stage
  bool offload = false;  // kDeepSpeed: optimizer state (and stage 3's parameters) in host memory; kFSDP: cpu_offload
};

std::span<const StrategyName> strategyNames();
// nullptr when `name` is not in the table.
const StrategyName* findStrategyName(std::string_view name);
// Every name, in table order.
std::vector<std::string> strategyNameList();

// Lightning's GPU strategy names and the name each runs as on HPU, as
// lightning-habana users rewrite them (ddp -> hpu_parallel,
// deepspeed_stage_2 -> hpu_deepspeed_stage_2).
struct GpuStrategyName {
  std::string_view gpu;
  std::string_view hpu;
  std::string_view why = "lightning-habana's name for it";  // said in the rewrite's note
};
std::span<const GpuStrategyName> gpuStrategyNames();

}  // namespace hpu::core
