#include "hpu/device/emulator.h"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>

#include "hpu/device/byte_size.h"
#include "hpu/device/errors.h"
#include "hpu/device/text.h"

namespace hpu::device {
namespace {

using detail::trim;

std::optional<long long> parseInteger(std::string_view text) {
  text = trim(text);
  long long value = 0;
  const char* end = text.data() + text.size();
  auto [next, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || next != end) return std::nullopt;
  return value;
}

EmulatorConfigError configError(std::string_view variable, const std::string& problem) {
  return EmulatorConfigError(std::string(variable), problem);
}

std::string valueOrUnset(std::string_view variable, const std::optional<std::string>& value) {
  return value ? fmt::format("{}={}", variable, *value) : fmt::format("{} unset", variable);
}

std::string joinIds(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) {
    if (!s.empty()) s += ',';
    s += std::to_string(id);
  }
  return s;
}

// "all" or a comma list of distinct ids in [0, count), sorted.
std::vector<int> parseIdList(std::string_view variable, const std::string& value, int count,
                             std::string_view what) {
  const std::string_view text = trim(value);
  std::vector<int> all(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) all[static_cast<std::size_t>(i)] = i;
  if (text == "all") return all;
  if (text.empty())
    throw configError(variable, fmt::format("is empty; unset it, or set 'all' or a comma list of {} ids "
                                            "such as 0,3",
                                            what));
  std::vector<int> ids;
  for (std::string_view item : detail::split(text, ',')) {
    const auto id = parseInteger(item);
    if (!id)
      throw configError(variable, fmt::format("'{}' in '{}' is not a {} id; use 'all' or a comma list "
                                              "such as 0,3",
                                              trim(item), value, what));
    if (*id < 0 || *id >= count)
      throw configError(variable, fmt::format("{} id {} is out of range: the node has {} devices "
                                              "({}={}), ids 0-{}",
                                              what, *id, count, kDevicesVariable, count, count - 1));
    if (std::find(ids.begin(), ids.end(), static_cast<int>(*id)) != ids.end())
      throw configError(variable, fmt::format("lists {} id {} twice in '{}'", what, *id, value));
    ids.push_back(static_cast<int>(*id));
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace

EmulatorSettings loadEmulatorSettings(const Environment& env) {
  EmulatorSettings s;
  if (auto v = env.get(kDevicesVariable)) {
    const auto n = parseInteger(*v);
    if (!n || *n < 1 || *n > kMaxDevicesPerNode)
      throw configError(kDevicesVariable, fmt::format("'{}' is not a device count; use 1 to {} (default 8)",
                                                      *v, kMaxDevicesPerNode));
    s.devicesPerNode = static_cast<int>(*n);
  }
  if (auto v = env.get(kGenerationVariable)) {
    const auto g = parseGeneration(trim(*v));
    if (!g)
      throw configError(kGenerationVariable,
                        fmt::format("'{}' is not a generation; use gaudi, gaudi2 (default) or gaudi3", *v));
    s.generation = *g;
  }
  if (auto v = env.get(kMemoryLimitVariable)) {
    const auto bytes = parseByteSize(*v);
    if (!bytes)
      throw configError(kMemoryLimitVariable,
                        fmt::format("'{}' is not a memory size; use a positive number with an optional unit "
                                    "B, KiB, MiB, GiB, KB, MB or GB, such as 256MiB",
                                    *v));
    s.memoryLimit = *bytes;
  }
  s.visibleDevices = env.get(kVisibleDevicesVariable);
  s.visibleModules = env.get(kVisibleModulesVariable);
  if (auto v = env.get(kLazyModeVariable)) {
    const std::string_view mode = trim(*v);
    if (mode == "1")
      s.mode = ExecutionMode::kLazy;
    else if (mode == "0")
      s.mode = ExecutionMode::kEager;
    else
      throw configError(kLazyModeVariable,
                        fmt::format("'{}' is not a mode; use 1 (lazy, the default) or 0 (eager)", *v));
  }
  if (auto v = env.get(kRecipeCacheVariable)) s.recipeCache = parseRecipeCacheConfig(*v);
  validate(s);
  return s;
}

void validate(const EmulatorSettings& s) {
  if (s.devicesPerNode < 1 || s.devicesPerNode > kMaxDevicesPerNode)
    throw configError(kDevicesVariable, fmt::format("{} devices per node is out of range; use 1 to {}",
                                                    s.devicesPerNode, kMaxDevicesPerNode));
  const DeviceSpec& spec = specFor(s.generation);
  // A shape-only device may trace past the HBM (estimate measures a whole
  // need, then compares it with the limit).
  if (s.memoryLimit && (*s.memoryLimit == 0 || (*s.memoryLimit > spec.hbmBytes && !s.shapeOnly)))
    throw configError(kMemoryLimitVariable,
                      fmt::format("{} is not within 1 B and {}'s {} of HBM; lower it or pick a generation "
                                  "with more memory ({})",
                                  formatByteSize(*s.memoryLimit), spec.name, formatByteSize(spec.hbmBytes),
                                  kGenerationVariable));
  visibleModuleIds(s);
}

std::vector<int> visibleModuleIds(const EmulatorSettings& s) {
  std::vector<int> devices = s.visibleDevices
                                 ? parseIdList(kVisibleDevicesVariable, *s.visibleDevices, s.devicesPerNode,
                                               "device")
                                 : parseIdList(kVisibleDevicesVariable, "all", s.devicesPerNode, "device");
  if (!s.visibleModules || trim(*s.visibleModules) == "all") return devices;
  std::vector<int> modules = parseIdList(kVisibleModulesVariable, *s.visibleModules, s.devicesPerNode, "module");
  for (int m : modules)
    if (std::find(devices.begin(), devices.end(), m) == devices.end())
      throw configError(kVisibleModulesVariable,
                        fmt::format("module {} is not visible: {}={} exposes modules {}", m,
                                    kVisibleDevicesVariable, s.visibleDevices.value_or("all"), joinIds(devices)));
  return modules;
}

MemoryLimit memoryLimitOf(const EmulatorSettings& s) {
  const DeviceSpec& spec = specFor(s.generation);
  if (s.memoryLimit)
    return {*s.memoryLimit, fmt::format("{}={}", kMemoryLimitVariable, formatByteSize(*s.memoryLimit)), true};
  return {spec.hbmBytes, fmt::format("{}'s {} of HBM", spec.name, formatByteSize(spec.hbmBytes)), false};
}

std::string describeVisibility(const EmulatorSettings& s) {
  return fmt::format("{}, {}", valueOrUnset(kVisibleDevicesVariable, s.visibleDevices),
                     valueOrUnset(kVisibleModulesVariable, s.visibleModules));
}

std::string describe(const EmulatorSettings& s) {
  const MemoryLimit limit = memoryLimitOf(s);
  return fmt::format("{} x {} per node, memory limit {} ({}), {} mode, {}{}", s.devicesPerNode,
                     generationName(s.generation), formatByteSize(limit.bytes),
                     limit.overridden ? kMemoryLimitVariable : "HBM", executionModeName(s.mode),
                     describeVisibility(s),
                     s.recipeCache ? fmt::format(", recipe cache {}", s.recipeCache->directory.string()) : "");
}

}  // namespace hpu::device
