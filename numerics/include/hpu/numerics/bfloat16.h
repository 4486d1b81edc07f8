// bfloat16 rounding: the project's one rule, used wherever a float becomes
// bfloat16 (device numerics: tensors' values, checkpoints, the bf16 wire;
// comm: the reduction kernels of bfloat16 collectives), so that a value
// rounds to the same bits wherever it is rounded. Round to nearest, ties to
// even; past the largest finite value, +-Inf; any NaN, whatever its sign and
// payload, 0xFFFF (PyTorch's bfloat16 NaN on CPU). Branch-free selects on
// 32-bit lanes, so loops over it vectorize. Pure functions; thread-safe.
#pragma once

#include <bit>
#include <cstdint>

namespace hpu::numerics {

// The float bits `bits` rounded to bfloat16's value set (the low 16 bits
// zero). Dropping 16 mantissa bits by adding 0x7FFF plus the kept lsb: a carry
// into the exponent is exactly the right result, up to Inf.
constexpr std::uint32_t roundToBFloat16(std::uint32_t bits) {
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  const std::uint32_t rounded = (magnitude + 0x7FFFu + ((magnitude >> 16) & 1u)) & 0xFFFF0000u;
  return magnitude > 0x7F800000u ? 0xFFFF0000u : (bits & 0x80000000u) | rounded;
}

constexpr std::uint16_t toBFloat16Bits(float x) {
  return static_cast<std::uint16_t>(roundToBFloat16(std::bit_cast<std::uint32_t>(x)) >> 16);
}

constexpr float fromBFloat16Bits(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

}  // namespace hpu::numerics
