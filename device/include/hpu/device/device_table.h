// The `hpu-train devices` listing: the emulator settings and one row per
// visible device, like a small hl-smi. Thread-safe if the platform's
// allocators are (they are).
#pragma once

#include <string>

#include "hpu/device/platform.h"

namespace hpu::device {

// A header line with the emulator settings, a line with the generation's
// public figures, then a table: device, module id, generation, memory in use
// and total, NIC ports, dtypes. Ends with a newline.
std::string formatDeviceTable(const Platform& platform);

}  // namespace hpu::device
