#include "hpu/device/platform.h"

#include <fmt/core.h>

#include "hpu/device/check.h"
#include "hpu/device/errors.h"

namespace hpu::device {

Platform::Platform(EmulatorSettings settings) : settings_(std::move(settings)) {
  validate(settings_);
  std::shared_ptr<RecipeDiskCache> diskCache;
  if (settings_.recipeCache) diskCache = std::make_shared<RecipeDiskCache>(*settings_.recipeCache);
  const std::vector<int> modules = visibleModuleIds(settings_);
  devices_.reserve(modules.size());
  for (std::size_t i = 0; i < modules.size(); ++i)
    devices_.push_back(std::make_unique<Device>(
        static_cast<int>(i), modules[i], settings_.generation,
        DeviceOptions{memoryLimitOf(settings_), settings_.mode, diskCache, settings_.shapeOnly}));
}

Platform Platform::fromEnv(const Environment& env) { return Platform(loadEmulatorSettings(env)); }

void Platform::requireDevices(int requested) const {
  HPU_CHECK(requested >= 1, "requireDevices({})", requested);
  if (requested <= autoDeviceCount()) return;
  throw NotEnoughDevicesError(
      fmt::format("There is not enough devices available for training. Please verify if "
                  "HABANA_VISIBLE_MODULES is set correctly: requested {}, visible {} ({}, {}={})",
                  requested, autoDeviceCount(), describeVisibility(settings_), kDevicesVariable,
                  settings_.devicesPerNode),
      requested, autoDeviceCount());
}

const Device& Platform::device(int index) const {
  HPU_CHECK(index >= 0 && index < autoDeviceCount(), "device {} of {} visible", index, autoDeviceCount());
  return *devices_[static_cast<std::size_t>(index)];
}

Device& Platform::device(int index) {
  return const_cast<Device&>(static_cast<const Platform&>(*this).device(index));
}

}  // namespace hpu::device
