// The packed AVX-512 GEMM behind gemm, gemmSerial and the convolutions, in
// the BLIS style: the micro-kernel keeps an 8 x 48 tile of C in 24 registers;
// op(B) is packed in 48-column panels of up to 256 rows that stay in L1,
// op(A) in 8-row panels that stay in L2. gemm() runs on the calling thread;
// gemmThreaded() shares the packing and the tiles among the OpenMP threads.
// With bfloat16 operands and AVX512_BF16, panels hold pairs of k as bf16 and
// the micro-kernel adds two products per lane and instruction (VDPBF16PS).
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
  for (int r = 0; r < runs.count; ++r) v = _mm512_mask_loadu_ps(v, runs.mask[r], data + row_offset + runs.offset[r]);
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

// How packed panels hold k: one fp32 row per k, or (kPaired) bfloat16 pairs,
// one 32-bit word per pair of k (the even k in its low half) for VDPBF16PS;
// an odd k's missing partner is zero. Rows per panel: kc, or kp = ceil(kc / 2).
template <bool kPaired>
constexpr std::int64_t packedRows(std::int64_t kc) {
  return kPaired ? (kc + 1) / 2 : kc;
}

// 16 lanes of (lo[j], hi[j]) as bfloat16 pairs, rounded to nearest even.
#if defined(__AVX512BF16__)
inline __m512 bf16Pairs(__m512 lo, __m512 hi) {
  const __m512i l = _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(lo)));
  const __m512i h = _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(hi)));
  return _mm512_castsi512_ps(_mm512_or_si512(l, _mm512_slli_epi32(h, 16)));
}
#endif

// Receives the packed rows kk = 0, 1, ... of 16 lanes and stores them: all
// 16 at lo (a B panel, `step` words per row), or lanes 0-7 at lo and 8-15 at
// hi (two A panels, either may be null). Paired, it stores every second
// call (finish() flushes an odd last row).
template <bool kPaired>
class RowSink {
 public:
  RowSink(float* lo, float* hi, bool split, std::int64_t step) : lo_(lo), hi_(hi), split_(split), step_(step) {}
  void put(std::int64_t kk, __m512 v) {
    if constexpr (kPaired) {
#if defined(__AVX512BF16__)
      if (kk % 2 == 0) {
        pending_ = v;
        odd_ = true;
        return;
      }
      odd_ = false;
      v = bf16Pairs(pending_, v);
      kk /= 2;
#endif
    }
    store(kk, v);
  }
  void finish(std::int64_t kc) {
#if defined(__AVX512BF16__)
    if (kPaired && odd_) store(kc / 2, bf16Pairs(pending_, _mm512_setzero_ps()));
#endif
  }

 private:
  void store(std::int64_t row, __m512 v) {
    if (!split_) return _mm512_store_ps(lo_ + row * step_, v);
    if (lo_ != nullptr) _mm256_store_ps(lo_ + row * step_, _mm512_castps512_ps256(v));
    if (hi_ != nullptr) _mm256_store_ps(hi_ + row * step_, _mm512_extractf32x8_ps(v, 1));
  }
  float* lo_;
  float* hi_;
  bool split_;
  std::int64_t step_;
  __m512 pending_ = _mm512_setzero_ps();
  bool odd_ = false;
};

// All of op(A)[:, k0 : k0 + kc] in kMr-row panels of packedRows(kc) rows:
// panel ip starts at dst + ip * packedRows(kc) * kMr, holding op(A)[ip * kMr
// + i, k0 + kk] at row kk (or its pair), lane i; rows past m zero. `a` is a
// Source for A (or for A^T when trans_a).
template <bool kPaired = false, class Source>
void packA(bool trans_a, const Source& a, std::int64_t m, std::int64_t k0, std::int64_t kc, float* dst) {
  const std::int64_t panels = (m + kMr - 1) / kMr, panel = packedRows<kPaired>(kc) * kMr;
  Runs runs;
  // Panels ip and ip + 1 (if any) as one sink.
  const auto sink = [&](std::int64_t ip) {
    return RowSink<kPaired>(dst + ip * panel, ip + 1 < panels ? dst + (ip + 1) * panel : nullptr, true, kMr);
  };
  if (trans_a) {  // S = A^T: row kk of two panels is 16 contiguous elements of S's row k0 + kk
    for (std::int64_t ip = 0; ip < panels; ip += 2) {
      a.columnRuns(ip * kMr, std::min(2 * kMr, m - ip * kMr), runs);
      RowSink<kPaired> out = sink(ip);
      for (std::int64_t kk = 0; kk < kc; ++kk) out.put(kk, loadRuns(a.data(), a.rowOffset(k0 + kk), runs));
      out.finish(kc);
    }
    return;
  }
  // S = A: rows are contiguous in k; 16 rows (two panels) x 16 k at a time,
  // transposed in registers.
  for (std::int64_t i0 = 0; i0 < m; i0 += 16) {
    std::int64_t row[16];
    for (std::int64_t i = 0; i < std::min<std::int64_t>(16, m - i0); ++i) row[i] = a.rowOffset(i0 + i);
    RowSink<kPaired> out = sink(i0 / kMr);
    for (std::int64_t kb = 0; kb < kc; kb += 16) {
      a.columnRuns(k0 + kb, std::min<std::int64_t>(16, kc - kb), runs);
      __m512 r[16];
      for (std::int64_t i = 0; i < 16; ++i) r[i] = i0 + i < m ? loadRuns(a.data(), row[i], runs) : _mm512_setzero_ps();
      transpose16(r);
      for (std::int64_t t = 0; t < std::min<std::int64_t>(16, kc - kb); ++t) out.put(kb + t, r[t]);
    }
    out.finish(kc);
  }
}

// op(B)[k0 : k0 + kc, j0 : j0 + cols] as one kNr-column panel of
// packedRows(kc) rows: row kk (or its pair), lane j at dst[kk * kNr + j];
// columns past `cols` zero.
template <bool kPaired = false, class Source>
void packB(bool trans_b, const Source& s, std::int64_t k0, std::int64_t kc, std::int64_t j0, std::int64_t cols,
           float* dst) {
  Runs runs[kNv];
  RowSink<kPaired> out[kNv] = {
      {dst, nullptr, false, kNr}, {dst + 16, nullptr, false, kNr}, {dst + 32, nullptr, false, kNr}};
  if (!trans_b) {  // S = B: row k0 + kk of S, columns j0 ...
    for (std::int64_t v = 0; v < kNv; ++v)
      s.columnRuns(j0 + 16 * v, std::clamp<std::int64_t>(cols - 16 * v, 0, 16), runs[v]);
    for (std::int64_t kk = 0; kk < kc; ++kk) {
      const std::int64_t row = s.rowOffset(k0 + kk);
      for (std::int64_t v = 0; v < kNv; ++v) out[v].put(kk, loadRuns(s.data(), row, runs[v]));
    }
  } else {
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
        for (std::int64_t t = 0; t < std::min<std::int64_t>(16, kc - kb); ++t) out[v].put(kb + t, r[t]);
      }
    }
  }
  for (auto& o : out) o.finish(kc);
}

// Writes (or adds) the accumulated tile to C [rows <= kMr, cols <= kNr].
inline void storeTile(const __m512 (&acc)[kMr][kNv], float* c, std::int64_t ldc, std::int64_t rows, std::int64_t cols,
                      bool accumulate) {
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
  storeTile(acc, c, ldc, rows, cols, accumulate);
}

#if defined(__AVX512BF16__)
// The micro-kernel on paired panels (packA / packB with kPaired): kp = ceil(kc / 2) pairs.
inline void microKernelBf16(std::int64_t kp, const float* __restrict ap, const float* __restrict bp, float* c,
                            std::int64_t ldc, std::int64_t rows, std::int64_t cols, bool accumulate) {
  __m512 acc[kMr][kNv];
  for (auto& row : acc)
    for (auto& v : row) v = _mm512_setzero_ps();
  for (std::int64_t p = 0; p < kp; ++p, ap += kMr, bp += kNr) {
    __m512bh bv[kNv];
    for (std::int64_t v = 0; v < kNv; ++v) bv[v] = reinterpret_cast<__m512bh>(_mm512_load_ps(bp + 16 * v));
#pragma GCC unroll 8
    for (std::int64_t i = 0; i < kMr; ++i) {
      const __m512bh av = reinterpret_cast<__m512bh>(_mm512_set1_ps(ap[i]));
      for (std::int64_t v = 0; v < kNv; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, bv[v]);
    }
  }
  storeTile(acc, c, ldc, rows, cols, accumulate);
}
#endif

// The operands' precision: float32, or bfloat16 values (products exact in
// fp32, sums in fp32). kBFloat16 runs on AVX512_BF16 where the CPU has it
// and on the fp32 kernel otherwise (the same products; sums may round in
// another order).
enum class Operands { kFloat32, kBFloat16 };

#if defined(__AVX512BF16__)
constexpr bool kHasBf16Pairs = true;
#else
constexpr bool kHasBf16Pairs = false;
#endif

// The micro-kernel for packed panels of kc k-rows (paired or not).
template <bool kPaired>
inline void tile(std::int64_t kc, const float* ap, const float* bp, float* c, std::int64_t ldc, std::int64_t rows,
                 std::int64_t cols, bool accumulate) {
#if defined(__AVX512BF16__)
  if constexpr (kPaired) return microKernelBf16(packedRows<true>(kc), ap, bp, c, ldc, rows, cols, accumulate);
#endif
  microKernel(kc, ap, bp, c, ldc, rows, cols, accumulate);
}

// C[m, n] (+)= op(A) * op(B), A and B read through Sources (see above).
template <Operands kOperands = Operands::kFloat32, class ASource, class BSource>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const ASource& a,
          const BSource& b, bool accumulate, float* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate)
      for (std::int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return;
  }
  constexpr bool kPaired = kHasBf16Pairs && kOperands == Operands::kBFloat16;
  const std::int64_t a_panels = (m + kMr - 1) / kMr;
  float* a_pack = scratch(1, kKc * a_panels * kMr);
  float* b_pack = scratch(0, kKc * kNc);
  for (std::int64_t k0 = 0; k0 < k; k0 += kKc) {
    const std::int64_t kc = std::min(kKc, k - k0), rows = packedRows<kPaired>(kc);
    const bool add = accumulate || k0 > 0;
    packA<kPaired>(trans_a, a, m, k0, kc, a_pack);
    for (std::int64_t j0 = 0; j0 < n; j0 += kNc) {
      const std::int64_t nc = std::min(kNc, n - j0), b_panels = (nc + kNr - 1) / kNr;
      for (std::int64_t jp = 0; jp < b_panels; ++jp)
        packB<kPaired>(trans_b, b, k0, kc, j0 + jp * kNr, std::min(kNr, nc - jp * kNr), b_pack + jp * rows * kNr);
      for (std::int64_t ib = 0; ib < a_panels; ib += kMc / kMr)  // A blocks of kMc rows stay in L2
        for (std::int64_t jp = 0; jp < b_panels; ++jp)
          for (std::int64_t ip = ib; ip < std::min(a_panels, ib + kMc / kMr); ++ip)
            tile<kPaired>(kc, a_pack + ip * rows * kMr, b_pack + jp * rows * kNr, c + ip * kMr * ldc + j0 + jp * kNr,
                          ldc, std::min(kMr, m - ip * kMr), std::min(kNr, nc - jp * kNr), add);
    }
  }
}

// gemm() of plain row-major A [m, k] (A^T when trans_a) and B on the OpenMP
// threads, in BLIS's scheme: for each kKc-deep slice of k the threads pack
// all of A and B between them, once, then share out C's tiles (kMc rows by
// kNr columns). Each element of C is summed in the same order as by gemm(),
// so the bits do not depend on the thread count. Call outside a parallel
// region.
template <Operands kOperands>
void gemmThreaded(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
                  const float* b, bool accumulate, float* c) {
  const std::int64_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
  if (m == 0 || n == 0 || k == 0)
    return gemm<kOperands>(trans_a, trans_b, m, n, k, DenseSource{a, lda}, DenseSource{b, ldb}, accumulate, c, n);
  constexpr bool kPaired = kHasBf16Pairs && kOperands == Operands::kBFloat16;
  const std::int64_t a_panels = (m + kMr - 1) / kMr, b_panels = (n + kNr - 1) / kNr;
  const std::int64_t a_groups = (m + 15) / 16, row_blocks = (a_panels + kMc / kMr - 1) / (kMc / kMr);
  float* a_pack = scratch(1, kKc * a_panels * kMr);
  float* b_pack = scratch(0, kKc * b_panels * kNr);
#pragma omp parallel
  for (std::int64_t k0 = 0; k0 < k; k0 += kKc) {
    const std::int64_t kc = std::min(kKc, k - k0), rows = packedRows<kPaired>(kc);
    const bool add = accumulate || k0 > 0;
    // Packing: A in groups of 16 rows (two panels), B in panels.
#pragma omp for schedule(dynamic, 4)
    for (std::int64_t g = 0; g < a_groups + b_panels; ++g) {
      if (g < a_groups) {
        const std::int64_t i0 = 16 * g;
        packA<kPaired>(trans_a, DenseSource{trans_a ? a + i0 : a + i0 * lda, lda}, std::min<std::int64_t>(16, m - i0),
                       k0, kc, a_pack + i0 / kMr * rows * kMr);
      } else {
        const std::int64_t jp = g - a_groups;
        packB<kPaired>(trans_b, DenseSource{b, ldb}, k0, kc, jp * kNr, std::min(kNr, n - jp * kNr),
                       b_pack + jp * rows * kNr);
      }
    }
    // Tiles: a B panel stays in L1 while the block's A panels stream from L2.
#pragma omp for schedule(dynamic, 1) collapse(2)
    for (std::int64_t ib = 0; ib < row_blocks; ++ib)
      for (std::int64_t jp = 0; jp < b_panels; ++jp)
        for (std::int64_t ip = ib * (kMc / kMr); ip < std::min(a_panels, (ib + 1) * (kMc / kMr)); ++ip)
          tile<kPaired>(kc, a_pack + ip * rows * kMr, b_pack + jp * rows * kNr, c + ip * kMr * n + jp * kNr, n,
                        std::min(kMr, m - ip * kMr), std::min(kNr, n - jp * kNr), add);
  }
}

}  // namespace hpu::device::kernels::packed
#endif
