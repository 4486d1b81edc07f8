// Gaudi generations and their public figures, in one table (spec.cc, with the
// source of every figure). Thread-safe: immutable data and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "hpu/device/dtype.h"

namespace hpu::device {

enum class Generation { kGaudi, kGaudi2, kGaudi3 };

// "gaudi", "gaudi2", "gaudi3".
std::string_view generationName(Generation g);
// Accepts the names above, case-insensitive, and "gaudi1" for kGaudi.
std::optional<Generation> parseGeneration(std::string_view name);

// Dense matrix-engine (MME) peak throughput for one dtype.
struct MatrixPeak {
  DType dtype;
  double tflops;
};

struct DeviceSpec {
  Generation generation;
  std::string_view name;            // generationName(generation)
  std::string_view product;         // marketing name, e.g. "Intel Gaudi 2"
  std::uint64_t hbmBytes;           // HBM capacity: the default memory limit
  double hbmTerabytesPerSecond;     // peak HBM bandwidth
  std::span<const MatrixPeak> matrixPeaks;  // only dtypes with a published figure
  int nicPorts;                     // integrated RoCE v2 Ethernet ports
  int nicGbitPerPort;               // speed of each port
  std::span<const DType> dtypes;    // dtypes a tensor may have on this generation
};

const DeviceSpec& specFor(Generation g);

bool supports(const DeviceSpec& spec, DType t);
// The published matrix-engine peak for t, if there is one.
std::optional<double> peakTflops(const DeviceSpec& spec, DType t);
// Throws UnsupportedDTypeError naming `where` (e.g. "hpu:0" or
// "trainer.precision") when spec cannot hold t, with what to use instead.
void requireSupported(const DeviceSpec& spec, DType t, std::string_view where);

}  // namespace hpu::device
