// Errors a user can cause in device/: every message names the device or the
// variable involved and what to change. Broken invariants (bugs) are not
// exceptions: they fail HPU_CHECK (check.h).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace hpu::device {

// Base of every device/ error.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An allocation would take a device's in-use memory past its limit.
struct OutOfMemoryInfo {
  std::string device;       // "hpu:0"
  std::uint64_t requested;  // logical bytes asked for
  std::uint64_t inUse;      // logical bytes in use before the request
  std::uint64_t limit;      // the device's limit
  std::string limitSource;  // "gaudi2's 96 GiB of HBM" or "HPU_EMULATOR_MEMORY_LIMIT=256 MiB"
  bool limitOverridden;     // true when HPU_EMULATOR_MEMORY_LIMIT set the limit
};

class OutOfMemoryError : public DeviceError {
 public:
  explicit OutOfMemoryError(OutOfMemoryInfo info);
  const OutOfMemoryInfo& info() const { return info_; }

 private:
  OutOfMemoryInfo info_;
};

// More devices were asked for than HABANA_VISIBLE_DEVICES/MODULES leave visible.
class NotEnoughDevicesError : public DeviceError {
 public:
  NotEnoughDevicesError(std::string message, int requested, int visible)
      : DeviceError(std::move(message)), requested_(requested), visible_(visible) {}
  int requested() const { return requested_; }
  int visible() const { return visible_; }

 private:
  int requested_;
  int visible_;
};

// A dtype the device's generation cannot hold (float64 anywhere, fp8 and
// float16 before Gaudi2).
class UnsupportedDTypeError : public DeviceError {
 public:
  using DeviceError::DeviceError;
};

// An emulator or runtime environment variable has a value that cannot be used.
class EmulatorConfigError : public DeviceError {
 public:
  EmulatorConfigError(std::string variable, const std::string& problem);
  const std::string& variable() const { return variable_; }

 private:
  std::string variable_;
};

}  // namespace hpu::device
