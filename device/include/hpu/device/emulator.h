// Emulator settings: what the emulated node looks like and how the runtime
// behaves, read from environment variables (docs/emulator.md, "Devices and settings"):
//
//   HPU_EMULATOR_DEVICES        devices per node, 1..256            default 8 (an HLS server)
//   HPU_EMULATOR_GENERATION     gaudi | gaudi2 | gaudi3             default gaudi2
//   HPU_EMULATOR_MEMORY_LIMIT   per-device limit, e.g. 256MiB       default the generation's HBM
//   HABANA_VISIBLE_DEVICES      "all" or device ids, e.g. 0,3       default all
//   HABANA_VISIBLE_MODULES      "all" or module ids, e.g. 2,3       default all
//   PT_HPU_LAZY_MODE            1 (lazy) or 0 (eager)               default 1
//   PT_HPU_RECIPE_CACHE_CONFIG  path,delete_on_init,size_mb         default none
//
// On the emulated node, device (accel) index i hosts module id i.
// HABANA_VISIBLE_DEVICES selects the devices the process may see, as a
// container runtime does; HABANA_VISIBLE_MODULES then selects modules among
// those. The visible devices are numbered hpu:0, hpu:1, ... in ascending
// module id. Thread-safety: plain data and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpu/device/allocator.h"
#include "hpu/device/graph.h"
#include "hpu/device/recipe_disk_cache.h"
#include "hpu/device/spec.h"
#include "hpu/env/environment.h"

namespace hpu::device {

inline constexpr std::string_view kDevicesVariable = "HPU_EMULATOR_DEVICES";
inline constexpr std::string_view kGenerationVariable = "HPU_EMULATOR_GENERATION";
inline constexpr std::string_view kMemoryLimitVariable = "HPU_EMULATOR_MEMORY_LIMIT";
inline constexpr std::string_view kVisibleDevicesVariable = "HABANA_VISIBLE_DEVICES";
inline constexpr std::string_view kVisibleModulesVariable = "HABANA_VISIBLE_MODULES";
inline constexpr std::string_view kLazyModeVariable = "PT_HPU_LAZY_MODE";
inline constexpr std::string_view kRecipeCacheVariable = "PT_HPU_RECIPE_CACHE_CONFIG";
inline constexpr int kMaxDevicesPerNode = 256;

struct EmulatorSettings {
  int devicesPerNode = 8;                          // HPU_EMULATOR_DEVICES
  Generation generation = Generation::kGaudi2;     // HPU_EMULATOR_GENERATION
  std::optional<std::uint64_t> memoryLimit;        // HPU_EMULATOR_MEMORY_LIMIT; unset: HBM capacity
  std::optional<std::string> visibleDevices;       // HABANA_VISIBLE_DEVICES, as set
  std::optional<std::string> visibleModules;       // HABANA_VISIBLE_MODULES, as set
  ExecutionMode mode = ExecutionMode::kLazy;       // PT_HPU_LAZY_MODE
  std::optional<RecipeCacheConfig> recipeCache;   // PT_HPU_RECIPE_CACHE_CONFIG
  bool shapeOnly = false;                          // set in code: devices without host storage (DeviceOptions)
};

// Reads and validates the variables above. Throws EmulatorConfigError naming
// the variable, its value and the accepted values.
EmulatorSettings loadEmulatorSettings(const Environment& env);

// Throws EmulatorConfigError if settings made in code (or loaded) are unusable.
void validate(const EmulatorSettings& settings);

// Module ids of the visible devices, ascending. Throws EmulatorConfigError
// for malformed lists, ids out of range, duplicates, and modules that
// HABANA_VISIBLE_DEVICES hides.
std::vector<int> visibleModuleIds(const EmulatorSettings& settings);

// The per-device memory limit and what set it.
MemoryLimit memoryLimitOf(const EmulatorSettings& settings);

// "HABANA_VISIBLE_DEVICES=0,3, HABANA_VISIBLE_MODULES unset".
std::string describeVisibility(const EmulatorSettings& settings);

// One line: "8 x gaudi2 per node, memory limit 96 GiB (HBM), lazy mode,
// HABANA_VISIBLE_DEVICES=0,3, HABANA_VISIBLE_MODULES unset".
std::string describe(const EmulatorSettings& settings);

}  // namespace hpu::device
