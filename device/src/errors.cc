#include "hpu/device/errors.h"

#include <fmt/core.h>

#include "hpu/device/byte_size.h"

namespace hpu::device {
namespace {

std::string outOfMemoryMessage(const OutOfMemoryInfo& i) {
  std::string fix = "lower data.init_args.batch_size or use trainer.precision=bf16-mixed";
  if (i.limitOverridden)
    fix = "lower data.init_args.batch_size, use trainer.precision=bf16-mixed, or raise the limit set by " +
          i.limitSource;
  else
    fix += fmt::format(" (the limit is {})", i.limitSource);
  return fmt::format("{}: out of memory: cannot allocate {} with {} of {} in use; {}", i.device,
                     formatByteSize(i.requested), formatByteSize(i.inUse), formatByteSize(i.limit), fix);
}

}  // namespace

OutOfMemoryError::OutOfMemoryError(OutOfMemoryInfo info)
    : DeviceError(outOfMemoryMessage(info)), info_(std::move(info)) {}

EmulatorConfigError::EmulatorConfigError(std::string variable, const std::string& problem)
    : DeviceError(fmt::format("{}: {}", variable, problem)), variable_(std::move(variable)) {}

}  // namespace hpu::device
