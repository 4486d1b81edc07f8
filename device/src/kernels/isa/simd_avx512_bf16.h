// AVX-512 vectors with AVX512_BF16's pair arithmetic, for the packed
// kernels' bf16 operands. Include only under `#pragma GCC target` for
// AVX-512 and AVX512_BF16 (isa/avx512_bf16.cc).
#pragma once

#include "simd_avx512.h"

namespace hpu::device::kernels::packed {

struct Avx512Bf16 : Avx512 {
  // 16 lanes of (lo[j], hi[j]) as bfloat16 pairs, rounded to nearest even:
  // one 32-bit word per pair, lo in the low half.
  static Reg pairs(Reg lo, Reg hi) {
    const __m512i l = _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(lo)));
    const __m512i h = _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(hi)));
    return _mm512_castsi512_ps(_mm512_or_si512(l, _mm512_slli_epi32(h, 16)));
  }
  // acc + a.lo * b.lo + a.hi * b.hi per lane (VDPBF16PS), a and b of pairs.
  static Reg dotPairs(Reg acc, Reg a, Reg b) {
    return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
  }
};

}  // namespace hpu::device::kernels::packed
