// 16-float AVX-512 vectors for the packed kernels (packed_gemm.h). Include
// only under `#pragma GCC target` for AVX-512 (isa/avx512.cc, avx512_bf16.cc).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace hpu::device::kernels::packed {

struct Avx512 {
  using Reg = __m512;
  static constexpr int kLanes = 16;
  static constexpr std::uint32_t kAll = 0xFFFF;

  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg load(const float* p) { return _mm512_load_ps(p); }  // 64-byte aligned
  static Reg broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  // v with the lanes in `mask` loaded from p (lane l from p[l]).
  static Reg loadLanes(Reg v, std::uint32_t mask, const float* p) {
    return _mm512_mask_loadu_ps(v, static_cast<__mmask16>(mask), p);
  }
  static void storeLanes(float* p, std::uint32_t mask, Reg v) {
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>(mask), v);
  }
  static void store(float* p, Reg v) { _mm512_store_ps(p, v); }  // 64-byte aligned
  // Lanes [0, 8) to lo and [8, 16) to hi (32-byte aligned; either may be null).
  static void storeHalves(float* lo, float* hi, Reg v) {
    if (lo != nullptr) _mm256_store_ps(lo, _mm512_castps512_ps256(v));
    if (hi != nullptr) _mm256_store_ps(hi, _mm512_extractf32x8_ps(v, 1));
  }

  // Transposes the 16 x 16 matrix held in r[0..15] (row i in r[i]).
  static void transpose(Reg r[16]) {
    Reg t[16];
    for (int i = 0; i < 16; i += 2) {
      t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
      r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
      r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
      r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
      r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int h = 0; h < 16; h += 8)
      for (int i = 0; i < 4; ++i) {
        t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
        t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xDD);
      }
    for (int i = 0; i < 8; ++i) {
      r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
      r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
    }
  }
};

}  // namespace hpu::device::kernels::packed
