// AVX-512 lane masks shared by the kernels that use 16-float vectors.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

#include <cstdint>

namespace hpu::device::kernels {

// Lanes [0, count) of a 16-lane vector (count clamped to 0..16).
inline __mmask16 laneMask(std::int64_t count) {
  return count >= 16 ? __mmask16{0xFFFF} : count <= 0 ? __mmask16{0} : static_cast<__mmask16>((1u << count) - 1);
}

// Lanes [lo, hi) of a 16-lane vector (empty when hi <= lo).
inline __mmask16 laneRange(std::int64_t lo, std::int64_t hi) {
  return static_cast<__mmask16>(laneMask(hi) & ~laneMask(lo));
}

}  // namespace hpu::device::kernels
#endif
