// The packed AVX-512 GEMM behind gemmSerial and the convolutions, in the BLIS
// style: the micro-kernel keeps an 8 x 48 tile of C in 24 registers; op(B) is
// packed in 48-column panels of up to 256 rows that stay in L1, op(A) in 8-row
// panels that stay in L2. Single-threaded.
//
// A and B are read through Sources, so a convolution can pack its column
// matrix straight from the images (implicit im2col) and its output gradient
// straight from the [image, channel, pixel] layout, materialising neither.
// A Source describes a stored matrix S (S = B, or B^T when trans_b; likewise
// A): S[row][col] is at data() + rowOffset(row) + an offset that depends on
// col only, and columnRuns() splits 16 consecutive columns into runs of
// lanes that are contiguous in memory.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "lane_mask.h"

namespace hpu::device::kernels::packed {

constexpr std::int64_t kMr = 8, kNv = 3, kNr = 16 * kNv, kKc = 256, kMc = 96, kNc = 288;

// Up to 16 runs of lanes: run r loads lanes mask[r] from data + offset[r] + lane
// (offset is the element offset of lane 0 for that run, the row's excluded).
struct Runs {
  int count = 0;
  __mmask16 mask[16];
  std::int64_t offset[16];
};

// A plain row-major matrix with rows ld floats apart.
struct DenseSource {
  const float* base;
  std::int64_t ld;
  const float* data() const { return base; }
  std::int64_t rowOffset(std::int64_t row) const { return row * ld; }
  void columnRuns(std::int64_t col0, std::int64_t count, Runs& runs) const {
    runs.count = 1;
    runs.mask[0] = laneMask(count);
    runs.offset[0] = col0;
  }
};

// 16 elements of S's row (offset row_offset) over the columns described by runs.
inline __m512 loadRuns(const float* data, std::int64_t row_offset, const Runs& runs) {
  __m512 v = _mm512_setzero_ps();
  for (int r = 0; r < runs.count; ++r)
    v = _mm512_mask_loadu_ps(v, runs.mask[r], data + row_offset + runs.offset[r]);
  return v;
}

// 64-byte aligned scratch reused by this thread's products.
inline float* scratch(int which, std::int64_t floats) {
  thread_local std::vector<float> buffers[2];
  auto& v = buffers[which];
  if (static_cast<std::int64_t>(v.size()) < floats + 16) v.resize(static_cast<std::size_t>(floats + 16));
  return reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(v.data()) + 63) & ~std::uintptr_t{63});
}

// Transposes the 16 x 16 matrix held in r[0..15] (row i in r[i]).
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
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

// All of op(A)[:, k0 : k0 + kc] in kMr-row panels: panel ip holds
// dst[ip * kc * kMr + kk * kMr + i] = op(A)[ip * kMr + i, k0 + kk], rows past m
// zero. `a` is a Source for A (or for A^T when trans_a).
template <class Source>
void packA(bool trans_a, const Source& a, std::int64_t m, std::int64_t k0, std::int64_t kc, float* dst) {
  const std::int64_t panels = (m + kMr - 1) / kMr;
  Runs runs;
  if (trans_a) {  // S = A^T: panel row kk is 8 contiguous elements of S's row k0 + kk
    for (std::int64_t ip = 0; ip < panels; ++ip) {
      a.columnRuns(ip * kMr, std::min(kMr, m - ip * kMr), runs);
      for (std::int64_t kk = 0; kk < kc; ++kk)
        _mm256_store_ps(dst + (ip * kc + kk) * kMr,
                        _mm512_castps512_ps256(loadRuns(a.data(), a.rowOffset(k0 + kk), runs)));
    }
    return;
  }
  // S = A: rows are contiguous in k; 16 rows (two panels) x 16 k at a time,
  // transposed in registers.
  for (std::int64_t i0 = 0; i0 < m; i0 += 16) {
    std::int64_t row[16];
    for (std::int64_t i = 0; i < std::min<std::int64_t>(16, m - i0); ++i) row[i] = a.rowOffset(i0 + i);
    for (std::int64_t kb = 0; kb < kc; kb += 16) {
      a.columnRuns(k0 + kb, std::min<std::int64_t>(16, kc - kb), runs);
      __m512 r[16];
      for (std::int64_t i = 0; i < 16; ++i) r[i] = i0 + i < m ? loadRuns(a.data(), row[i], runs) : _mm512_setzero_ps();
      transpose16(r);
      const std::int64_t ip = i0 / kMr;
      for (std::int64_t t = 0; t < std::min<std::int64_t>(16, kc - kb); ++t) {
        _mm256_store_ps(dst + (ip * kc + kb + t) * kMr, _mm512_castps512_ps256(r[t]));
        if (ip + 1 < panels) _mm256_store_ps(dst + ((ip + 1) * kc + kb + t) * kMr, _mm512_extractf32x8_ps(r[t], 1));
      }
    }
  }
}

// dst[kk * kNr + j] = op(B)[k0 + kk, j0 + j], columns past `cols` zero.
template <class Source>
void packB(bool trans_b, const Source& s, std::int64_t k0, std::int64_t kc, std::int64_t j0, std::int64_t cols,
           float* dst) {
  Runs runs[kNv];
  if (!trans_b) {  // S = B: row k0 + kk of S, columns j0 ...
    for (std::int64_t v = 0; v < kNv; ++v) s.columnRuns(j0 + 16 * v, std::clamp<std::int64_t>(cols - 16 * v, 0, 16), runs[v]);
    for (std::int64_t kk = 0; kk < kc; ++kk) {
      const std::int64_t row = s.rowOffset(k0 + kk);
      for (std::int64_t v = 0; v < kNv; ++v) _mm512_store_ps(dst + kk * kNr + 16 * v, loadRuns(s.data(), row, runs[v]));
    }
    return;
  }
  // S = B^T: rows j of S are contiguous in k; 16 x 16 blocks are transposed
  // in registers.
  std::int64_t row[kNr];
  for (std::int64_t j = 0; j < cols; ++j) row[j] = s.rowOffset(j0 + j);
  for (std::int64_t kb = 0; kb < kc; kb += 16) {
    s.columnRuns(k0 + kb, std::min<std::int64_t>(16, kc - kb), runs[0]);
    for (std::int64_t v = 0; v < kNv; ++v) {
      __m512 r[16];
      for (std::int64_t j = 0; j < 16; ++j) {
        const std::int64_t col = 16 * v + j;
        r[j] = col < cols ? loadRuns(s.data(), row[col], runs[0]) : _mm512_setzero_ps();
      }
      transpose16(r);
      for (std::int64_t t = 0; t < std::min<std::int64_t>(16, kc - kb); ++t)
        _mm512_store_ps(dst + (kb + t) * kNr + 16 * v, r[t]);
    }
  }
}

// C tile [rows <= kMr, cols <= kNr] (+)= packed A panel * packed B panel.
inline void microKernel(std::int64_t kc, const float* __restrict ap, const float* __restrict bp, float* c,
                        std::int64_t ldc, std::int64_t rows, std::int64_t cols, bool accumulate) {
  __m512 acc[kMr][kNv];
  for (auto& row : acc)
    for (auto& v : row) v = _mm512_setzero_ps();
  for (std::int64_t kk = 0; kk < kc; ++kk, ap += kMr, bp += kNr) {
    __m512 bv[kNv];
    for (std::int64_t v = 0; v < kNv; ++v) bv[v] = _mm512_load_ps(bp + 16 * v);
#pragma GCC unroll 8
    for (std::int64_t i = 0; i < kMr; ++i) {
      const __m512 av = _mm512_set1_ps(ap[i]);
      for (std::int64_t v = 0; v < kNv; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
    }
  }
  __mmask16 mask[kNv];
  for (std::int64_t v = 0; v < kNv; ++v) mask[v] = laneMask(cols - 16 * v);
  for (std::int64_t i = 0; i < rows; ++i) {
    float* row = c + i * ldc;
    for (std::int64_t v = 0; v < kNv; ++v) {
      __m512 out = acc[i][v];
      if (accumulate) out = _mm512_add_ps(out, _mm512_maskz_loadu_ps(mask[v], row + 16 * v));
      _mm512_mask_storeu_ps(row + 16 * v, mask[v], out);
    }
  }
}

// C[m, n] (+)= op(A) * op(B), A and B read through Sources (see above).
template <class ASource, class BSource>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const ASource& a,
          const BSource& b, bool accumulate, float* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate)
      for (std::int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return;
  }
  const std::int64_t a_panels = (m + kMr - 1) / kMr;
  float* a_pack = scratch(1, kKc * a_panels * kMr);
  float* b_pack = scratch(0, kKc * kNc);
  for (std::int64_t k0 = 0; k0 < k; k0 += kKc) {
    const std::int64_t kc = std::min(kKc, k - k0);
    const bool add = accumulate || k0 > 0;
    packA(trans_a, a, m, k0, kc, a_pack);
    for (std::int64_t j0 = 0; j0 < n; j0 += kNc) {
      const std::int64_t nc = std::min(kNc, n - j0), b_panels = (nc + kNr - 1) / kNr;
      for (std::int64_t jp = 0; jp < b_panels; ++jp)
        packB(trans_b, b, k0, kc, j0 + jp * kNr, std::min(kNr, nc - jp * kNr), b_pack + jp * kc * kNr);
      for (std::int64_t ib = 0; ib < a_panels; ib += kMc / kMr)  // A blocks of kMc rows stay in L2
        for (std::int64_t jp = 0; jp < b_panels; ++jp)
          for (std::int64_t ip = ib; ip < std::min(a_panels, ib + kMc / kMr); ++ip)
            microKernel(kc, a_pack + ip * kc * kMr, b_pack + jp * kc * kNr, c + ip * kMr * ldc + j0 + jp * kNr, ldc,
                        std::min(kMr, m - ip * kMr), std::min(kNr, nc - jp * kNr), add);
    }
  }
}

}  // namespace hpu::device::kernels::packed
#endif
