// The emulated HPUs one process can see. Each process (each rank) owns its
// own Platform; local rank r uses device(r).
//
// Thread-safety: the device list is immutable after construction; see
// device.h for what each Device allows.
#pragma once

#include <memory>
#include <vector>

#include "hpu/device/device.h"
#include "hpu/device/emulator.h"

namespace hpu::device {

class Platform {
 public:
  // Throws EmulatorConfigError if the settings are unusable (validate()).
  explicit Platform(EmulatorSettings settings);
  // Platform(loadEmulatorSettings(env)).
  static Platform fromEnv(const Environment& env);

  Platform(Platform&&) noexcept = default;
  Platform& operator=(Platform&&) noexcept = default;

  const EmulatorSettings& settings() const { return settings_; }
  // The number of visible devices (HPUAccelerator.auto_device_count()).
  int autoDeviceCount() const { return static_cast<int>(devices_.size()); }
  // Throws NotEnoughDevicesError if fewer than `requested` devices are
  // visible. REQUIRES: requested >= 1.
  void requireDevices(int requested) const;
  // REQUIRES: 0 <= index < autoDeviceCount().
  Device& device(int index);
  const Device& device(int index) const;

 private:
  EmulatorSettings settings_;
  std::vector<std::unique_ptr<Device>> devices_;
};

}  // namespace hpu::device
