#include "hpu/device/device.h"

#include <fmt/core.h>

namespace hpu::device {

Device::Device(int index, int moduleId, Generation generation, DeviceOptions options)
    : index_(index),
      moduleId_(moduleId),
      name_(fmt::format("hpu:{}", index)),
      spec_(specFor(generation)),
      shapeOnly_(options.shapeOnly),
      allocator_(*this, std::move(options.memoryLimit)),
      graph_(name_, GraphOptions{options.mode, std::string(spec_.name), std::move(options.recipeDiskCache)}) {}

void Device::requireSupported(DType t) const { hpu::device::requireSupported(spec_, t, name_); }

}  // namespace hpu::device
