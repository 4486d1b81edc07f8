// 8-float AVX2 vectors (with FMA) for the packed kernels (packed_gemm.h).
// Include only under `#pragma GCC target("avx2,fma")` (isa/avx2.cc).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace hpu::device::kernels::packed {

struct Avx2 {
  using Reg = __m256;
  static constexpr int kLanes = 8;
  static constexpr std::uint32_t kAll = 0xFF;

  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg load(const float* p) { return _mm256_load_ps(p); }  // 32-byte aligned
  static Reg broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  // All ones in the lanes of `mask`.
  static __m256i laneBits(std::uint32_t mask) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(mask)), bit), bit);
  }
  // v with the lanes in `mask` loaded from p (lane l from p[l]); masked-off
  // lanes are not read.
  static Reg loadLanes(Reg v, std::uint32_t mask, const float* p) {
    if (mask == kAll) return _mm256_loadu_ps(p);
    const __m256i m = laneBits(mask);
    return _mm256_blendv_ps(v, _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
  }
  static void storeLanes(float* p, std::uint32_t mask, Reg v) {
    if (mask == kAll) return _mm256_storeu_ps(p, v);
    _mm256_maskstore_ps(p, laneBits(mask), v);
  }
  static void store(float* p, Reg v) { _mm256_store_ps(p, v); }  // 32-byte aligned
  // Lanes [0, 4) to lo and [4, 8) to hi (16-byte aligned; either may be null).
  static void storeHalves(float* lo, float* hi, Reg v) {
    if (lo != nullptr) _mm_store_ps(lo, _mm256_castps256_ps128(v));
    if (hi != nullptr) _mm_store_ps(hi, _mm256_extractf128_ps(v, 1));
  }

  // Transposes the 8 x 8 matrix held in r[0..7] (row i in r[i]).
  static void transpose(Reg r[8]) {
    Reg t[8];
    for (int i = 0; i < 8; i += 2) {
      t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    Reg u[8];
    for (int i = 0; i < 8; i += 4) {
      u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
      u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
      u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
      u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; ++i) {
      r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
      r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
  }
};

}  // namespace hpu::device::kernels::packed
