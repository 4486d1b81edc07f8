#include "hpu/device/spec.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>

#include "hpu/device/check.h"
#include "hpu/device/errors.h"
#include "hpu/device/text.h"

namespace hpu::device {
namespace {

constexpr std::uint64_t kGiB = 1ull << 30;

// Sources (HBM "GB" in these documents are binary gigabytes of HBM stacks):
//  [HC24]  R. Kaplan (Intel), "Intel Gaudi 3 AI Accelerator: Architected for
//          Gen AI Training and Inference", Hot Chips 2024, slide "Gaudi
//          product generations": BF16 peak, HBM capacity and bandwidth of all
//          three generations.
//  [G3WP]  Intel, "Intel Gaudi 3 AI Accelerator White Paper", 2024, spec
//          table comparing Gaudi 2 and Gaudi 3: FP8 and BF16 matrix TFLOPs,
//          24x 200 GbE RoCE ports on Gaudi 3.
//  [G2WP]  Habana Labs, "Habana Gaudi2 White Paper", v1.1, May 2022:
//          24x 100 GbE RoCE ports, FP8 support.
//  [G1WP]  Habana Labs, "Gaudi Training Platform White Paper", v1.0, June
//          2019: ten 100 GbE RoCE v2 ports on-chip.
//  [PTSM]  Intel Gaudi documentation, "PyTorch Support Matrix" / mixed
//          precision guide: float16 and fp8 only on Gaudi 2 and later;
//          float64 is not a device dtype.

constexpr std::array<MatrixPeak, 1> kGaudiPeaks{{
    {DType::kBFloat16, 60.0},  // [HC24]
}};
constexpr std::array<MatrixPeak, 3> kGaudi2Peaks{{
    {DType::kBFloat16, 432.0},    // [HC24], [G3WP]
    {DType::kFloat8E4M3, 865.0},  // [G3WP]
    {DType::kFloat8E5M2, 865.0},  // [G3WP]
}};
constexpr std::array<MatrixPeak, 3> kGaudi3Peaks{{
    {DType::kBFloat16, 1835.0},    // [HC24], [G3WP]
    {DType::kFloat8E4M3, 1835.0},  // [G3WP]
    {DType::kFloat8E5M2, 1835.0},  // [G3WP]
}};

// [PTSM]
constexpr std::array<DType, 6> kGaudiDTypes{
    DType::kFloat32, DType::kBFloat16, DType::kInt64, DType::kInt32, DType::kUInt8, DType::kBool};
constexpr std::array<DType, 9> kGaudi2PlusDTypes{
    DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kFloat8E4M3, DType::kFloat8E5M2,
    DType::kInt64,   DType::kInt32,    DType::kUInt8,   DType::kBool};

constexpr std::array<DeviceSpec, 3> kSpecs{{
    {Generation::kGaudi, "gaudi", "Habana Gaudi",
     32 * kGiB,  // [HC24]
     0.9,        // [HC24]: 900 GB/s
     kGaudiPeaks,
     10, 100,  // [G1WP]
     kGaudiDTypes},
    {Generation::kGaudi2, "gaudi2", "Intel Gaudi 2",
     96 * kGiB,  // [HC24]
     2.46,       // [HC24]
     kGaudi2Peaks,
     24, 100,  // [G2WP]
     kGaudi2PlusDTypes},
    {Generation::kGaudi3, "gaudi3", "Intel Gaudi 3",
     128 * kGiB,  // [HC24]
     3.67,        // [HC24]
     kGaudi3Peaks,
     24, 200,  // [G3WP]
     kGaudi2PlusDTypes},
}};

}  // namespace

std::string_view generationName(Generation g) { return specFor(g).name; }

std::optional<Generation> parseGeneration(std::string_view name) {
  const std::string lower = detail::toLower(name);
  if (lower == "gaudi1") return Generation::kGaudi;
  for (const DeviceSpec& s : kSpecs)
    if (s.name == lower) return s.generation;
  return std::nullopt;
}

const DeviceSpec& specFor(Generation g) {
  const auto i = static_cast<std::size_t>(g);
  HPU_CHECK(i < kSpecs.size() && kSpecs[i].generation == g, "unknown generation {}", i);
  return kSpecs[i];
}

bool supports(const DeviceSpec& spec, DType t) {
  return std::find(spec.dtypes.begin(), spec.dtypes.end(), t) != spec.dtypes.end();
}

std::optional<double> peakTflops(const DeviceSpec& spec, DType t) {
  for (const MatrixPeak& p : spec.matrixPeaks)
    if (p.dtype == t) return p.tflops;
  return std::nullopt;
}

void requireSupported(const DeviceSpec& spec, DType t, std::string_view where) {
  if (supports(spec, t)) return;
  if (t == DType::kFloat64)
    throw UnsupportedDTypeError(fmt::format(
        "{}: float64 is not supported on HPU ({}); use float32", where, spec.name));
  if (isFp8(t))
    throw UnsupportedDTypeError(fmt::format(
        "{}: FP8 not supported on Gaudi, Gaudi2 or higher required ({} asked on {}; set "
        "HPU_EMULATOR_GENERATION=gaudi2 or gaudi3)",
        where, dtypeName(t), spec.name));
  if (t == DType::kFloat16)
    throw UnsupportedDTypeError(fmt::format(
        "{}: float16 not supported on Gaudi, Gaudi2 or higher required; use bfloat16 "
        "(trainer.precision=bf16-mixed) or set HPU_EMULATOR_GENERATION=gaudi2",
        where));
  throw UnsupportedDTypeError(
      fmt::format("{}: {} is not supported on {}", where, dtypeName(t), spec.name));
}

}  // namespace hpu::device
