// 2x2, stride 2 max pooling on AVX-512 (pool.cc): 16 windows per step, the
// pairs of each input row split into even and odd columns by permutes, rows
// shorter than 16 windows handled by masked loads and stores. The same
// windows, maxima and arg-max indices as pool.cc's scalar loop: the first
// maximum in window order, a NaN winning. (The backward stays scalar: a
// SIMD one that wrote whole windows measured 1.5x slower than zeroing and
// scattering.) Include under the AVX-512 `#pragma GCC target`
// (isa/avx512.cc).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "hpu/device/kernels/pool.h"

namespace hpu::device::kernels::simd {

namespace pool_detail {

inline __mmask16 lanes(std::int64_t count) {
  return static_cast<__mmask16>(count >= 16 ? 0xFFFF : count <= 0 ? 0 : (1u << count) - 1);
}

// Lanes where v replaces best: best is not NaN and v is larger or NaN.
inline __mmask16 takes(__m512 v, __m512 best) {
  return _mm512_cmp_ps_mask(best, best, _CMP_ORD_Q) &
         (_mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q));
}

// The even and odd elements of the 2 * count floats at p (count <= 16).
inline void pairsOf(const float* p, std::int64_t count, __m512& even, __m512& odd) {
  const __m512 lo = _mm512_maskz_loadu_ps(lanes(2 * count), p);
  const __m512 hi = _mm512_maskz_loadu_ps(lanes(2 * count - 16), p + 16);
  const __m512i even_idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  even = _mm512_permutex2var_ps(lo, even_idx, hi);
  odd = _mm512_permutex2var_ps(lo, _mm512_add_epi32(even_idx, _mm512_set1_epi32(1)), hi);
}

}  // namespace pool_detail

// Planes [p0, p1) of a 2x2, stride 2, unpadded max pool.
inline void maxPool2x2(const Pool2dShape& g, std::int64_t p0, std::int64_t p1, const float* x, float* y,
                       std::int32_t* argmax) {
  using namespace pool_detail;
  const std::int64_t oh = g.outH(), ow = g.outW();
  const __m512i lane2 = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i one = _mm512_set1_epi32(1), below = _mm512_set1_epi32(static_cast<std::int32_t>(g.w));
  const __m512i below_right = _mm512_add_epi32(below, one);
  for (std::int64_t p = p0; p < p1; ++p)
    for (std::int64_t oy = 0; oy < oh; ++oy) {
      const float* r0 = x + (p * g.h + 2 * oy) * g.w;
      const std::int64_t o = (p * oh + oy) * ow;
      for (std::int64_t ox = 0; ox < ow; ox += 16) {
        const std::int64_t count = std::min<std::int64_t>(16, ow - ox);
        __m512 a, b, c, d;
        pairsOf(r0 + 2 * ox, count, a, b);
        pairsOf(r0 + g.w + 2 * ox, count, c, d);
        __m512 best = a;
        __m512i at = _mm512_setzero_si512();
        __mmask16 t = takes(b, best);
        best = _mm512_mask_mov_ps(best, t, b);
        at = _mm512_mask_mov_epi32(at, t, one);
        t = takes(c, best);
        best = _mm512_mask_mov_ps(best, t, c);
        at = _mm512_mask_mov_epi32(at, t, below);
        t = takes(d, best);
        best = _mm512_mask_mov_ps(best, t, d);
        at = _mm512_mask_mov_epi32(at, t, below_right);
        // The index of a in the plane: 2 * oy * w + 2 * (ox + lane).
        const __m512i base = _mm512_set1_epi32(static_cast<std::int32_t>(2 * oy * g.w + 2 * ox));
        const __mmask16 m = lanes(count);
        _mm512_mask_storeu_ps(y + o + ox, m, best);
        _mm512_mask_storeu_epi32(argmax + o + ox, m, _mm512_add_epi32(_mm512_add_epi32(base, lane2), at));
      }
    }
}

}  // namespace hpu::device::kernels::simd
