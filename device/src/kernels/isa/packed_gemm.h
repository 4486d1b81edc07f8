// The packed GEMM behind gemm, gemmSerial and the convolutions, in the BLIS
// style, written once over a vector type V (simd_avx512.h: 16 floats,
// simd_avx2.h: 8 floats) and compiled once per instruction set (isa/*.cc).
// The micro-kernel keeps a kMr x kNr tile of C in registers (kMr = lanes / 2
// rows by three vectors: 8 x 48 on AVX-512, 4 x 24 on AVX2; a narrower last
// panel uses fewer vectors); op(B) is packed in kNr-column panels of up to
// kKc rows, op(A) in kMr-row panels that stay in L2, or, when A is a plain
// fp32 matrix that is not transposed, read in place (DirectA). With V =
// Avx512Bf16 and bf16 operands (kPaired), panels hold pairs of k as bf16 and
// the micro-kernel adds two products per lane and instruction (VDPBF16PS).
//
// A and B are read through Sources, so a convolution can pack its column
// matrix straight from the images (implicit im2col) and its output gradient
// straight from the [image, channel, pixel] layout, materialising neither.
// A Source describes a stored matrix S (S = B, or B^T when trans_b; likewise
// A): S[row][col] is at data() + rowOffset(row) + an offset that depends on
// col only, and columnRuns() splits up to 16 consecutive columns into runs
// of lanes that are contiguous in memory (sources.h).
//
// Every element of C is summed in the same order, k slice by k slice, by
// gemm() and gemmThreaded() with any thread count: results depend on the
// instruction set only. (gemmThreaded sums a weight gradient A^T B in two
// halves of k, at every thread count: there its bits are not gemmSerial's.)
//
// Include after the standard headers and under the instruction set's
// `#pragma GCC target` (see isa/avx512.cc), so that only these kernels are
// compiled for it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "../sources.h"
#include "hpu/device/threading.h"

namespace hpu::device::kernels::packed {

constexpr std::int64_t kKc = 256, kNv = 3;

template <class V>
struct Tile {
  static constexpr std::int64_t kMr = V::kLanes / 2, kNr = V::kLanes * kNv;
  static constexpr std::int64_t kMc = 96;       // rows of A per L2 block
  static constexpr std::int64_t kNc = 6 * kNr;  // columns of B per serial pass
};

// How many panels a packing walk down a stored matrix's rows takes at once,
// so that it reads each 64-byte line of those rows once: pairs of A panels
// (kLanes columns of A^T's rows) per line, and B panels (kNr columns of B's
// rows) per whole number of lines. A walk per panel read a line shared with
// the next panel twice, the second time after the rows' stride had evicted it.
template <class V>
constexpr std::int64_t kPairsPerLine = std::max<std::int64_t>(1, 16 / V::kLanes);
template <class V>
constexpr std::int64_t kBPanelsPerLines = Tile<V>::kNr * sizeof(float) % 64 == 0 ? 1 : 2;

// V::kLanes elements of S's row (offset row_offset) over the columns
// described by runs; lanes outside every run are zero.
template <class V>
typename V::Reg loadRuns(const float* data, std::int64_t row_offset, const Runs& runs) {
  typename V::Reg v = V::zero();
  for (int r = 0; r < runs.count; ++r) v = V::loadLanes(v, runs.mask[r], data + row_offset + runs.offset[r]);
  return v;
}

// 64-byte aligned scratch reused by this thread's products: 0 packed B, 1
// packed A, 2 a weight gradient's second half (weightGradientHalves).
inline float* scratch(int which, std::int64_t floats) {
  thread_local std::vector<float> buffers[3];
  auto& v = buffers[which];
  if (static_cast<std::int64_t>(v.size()) < floats + 16) v.resize(static_cast<std::size_t>(floats + 16));
  return reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(v.data()) + 63) & ~std::uintptr_t{63});
}

// How packed panels hold k: one fp32 row per k, or (kPaired) bfloat16 pairs,
// one 32-bit word per pair of k (the even k in its low half); an odd k's
// missing partner is zero. Rows per panel: kc, or ceil(kc / 2).
template <bool kPaired>
constexpr std::int64_t packedRows(std::int64_t kc) {
  return kPaired ? (kc + 1) / 2 : kc;
}

// Receives the packed rows kk = 0, 1, ... of V::kLanes lanes and stores them:
// all at lo (a B panel, `step` words per row), or the low half of the lanes
// at lo and the high half at hi (two A panels, either may be null). Paired,
// it stores every second call (finish() flushes an odd last row).
template <class V, bool kPaired>
class RowSink {
 public:
  using Reg = typename V::Reg;
  RowSink() = default;
  RowSink(float* lo, float* hi, bool split, std::int64_t step) : lo_(lo), hi_(hi), split_(split), step_(step) {}
  void put(std::int64_t kk, Reg v) {
    if constexpr (kPaired) {
      if (kk % 2 == 0) {
        pending_ = v;
        odd_ = true;
        return;
      }
      odd_ = false;
      v = V::pairs(pending_, v);
      kk /= 2;
    }
    store(kk, v);
  }
  void finish(std::int64_t kc) {
    if constexpr (kPaired)
      if (odd_) store(kc / 2, V::pairs(pending_, V::zero()));
  }

 private:
  void store(std::int64_t row, Reg v) {
    if (!split_) return V::store(lo_ + row * step_, v);
    V::storeHalves(lo_ != nullptr ? lo_ + row * step_ : nullptr, hi_ != nullptr ? hi_ + row * step_ : nullptr, v);
  }
  float* lo_ = nullptr;
  float* hi_ = nullptr;
  bool split_ = false;
  std::int64_t step_ = 0;
  Reg pending_ = V::zero();
  bool odd_ = false;
};

// All of op(A)[:, k0 : k0 + kc] in kMr-row panels of packedRows(kc) rows:
// panel ip starts at dst + ip * packedRows(kc) * kMr, holding op(A)[ip * kMr
// + i, k0 + kk] at row kk (or its pair), lane i; rows past m zero. `a` is a
// Source for A (or for A^T when trans_a).
template <class V, bool kPaired, class Source>
void packA(bool trans_a, const Source& a, std::int64_t m, std::int64_t k0, std::int64_t kc, float* dst) {
  constexpr std::int64_t kL = V::kLanes, kMr = Tile<V>::kMr;
  const std::int64_t panels = (m + kMr - 1) / kMr, panel = packedRows<kPaired>(kc) * kMr;
  Runs runs;
  // Panels ip and ip + 1 (if any) as one sink.
  const auto sink = [&](std::int64_t ip) {
    return RowSink<V, kPaired>(dst + ip * panel, ip + 1 < panels ? dst + (ip + 1) * panel : nullptr, true, kMr);
  };
  if (trans_a) {  // S = A^T: row kk of two panels is kL contiguous elements of S's row k0 + kk
    // The pairs of panels that share S's 64-byte lines are packed in one walk
    // down S's rows, each line read once (a walk per pair read every line
    // twice, the second time after S's stride had evicted it).
    constexpr std::int64_t kPairs = kPairsPerLine<V>;
    for (std::int64_t ip0 = 0; ip0 < panels; ip0 += 2 * kPairs) {
      const std::int64_t pairs = std::min(kPairs, (panels - ip0 + 1) / 2);
      Runs pair_runs[kPairs];
      RowSink<V, kPaired> out[kPairs];
      for (std::int64_t p = 0; p < pairs; ++p) {
        const std::int64_t ip = ip0 + 2 * p;
        a.columnRuns(ip * kMr, std::min(kL, m - ip * kMr), pair_runs[p]);
        out[p] = sink(ip);
      }
      for (std::int64_t kk = 0; kk < kc; ++kk) {
        const std::int64_t row = a.rowOffset(k0 + kk);
        for (std::int64_t p = 0; p < pairs; ++p) out[p].put(kk, loadRuns<V>(a.data(), row, pair_runs[p]));
      }
      for (std::int64_t p = 0; p < pairs; ++p) out[p].finish(kc);
    }
    return;
  }
  // S = A: rows are contiguous in k; kL rows (two panels) x kL k at a time,
  // transposed in registers.
  for (std::int64_t i0 = 0; i0 < m; i0 += kL) {
    std::int64_t row[kL];
    for (std::int64_t i = 0; i < std::min(kL, m - i0); ++i) row[i] = a.rowOffset(i0 + i);
    RowSink<V, kPaired> out = sink(i0 / kMr);
    for (std::int64_t kb = 0; kb < kc; kb += kL) {
      a.columnRuns(k0 + kb, std::min(kL, kc - kb), runs);
      typename V::Reg r[kL];
      for (std::int64_t i = 0; i < kL; ++i) r[i] = i0 + i < m ? loadRuns<V>(a.data(), row[i], runs) : V::zero();
      V::transpose(r);
      for (std::int64_t t = 0; t < std::min(kL, kc - kb); ++t) out.put(kb + t, r[t]);
    }
    out.finish(kc);
  }
}

// op(B)[k0 : k0 + kc, j0 : j0 + cols] as kNr-column panels of
// packedRows(kc) rows, panel p at dst + p * packedRows(kc) * kNr: row kk (or
// its pair), lane j at dst[kk * kNr + j]; columns past `cols` zero. cols <=
// kNr, or when !trans_b up to kBPanelsPerLines * kNr.
template <class V, bool kPaired, class Source>
void packB(bool trans_b, const Source& s, std::int64_t k0, std::int64_t kc, std::int64_t j0, std::int64_t cols,
           float* dst) {
  constexpr std::int64_t kL = V::kLanes, kNr = Tile<V>::kNr, kMaxPanels = kBPanelsPerLines<V>;
  if (!trans_b) {  // S = B: row k0 + kk of S, columns j0 ...
    const std::int64_t panels = (cols + kNr - 1) / kNr, panel = packedRows<kPaired>(kc) * kNr;
    Runs runs[kMaxPanels * kNv];
    RowSink<V, kPaired> out[kMaxPanels * kNv];
    for (std::int64_t u = 0; u < panels * kNv; ++u) {
      s.columnRuns(j0 + kL * u, std::clamp<std::int64_t>(cols - kL * u, 0, kL), runs[u]);
      out[u] = RowSink<V, kPaired>(dst + u / kNv * panel + u % kNv * kL, nullptr, false, kNr);
    }
    for (std::int64_t kk = 0; kk < kc; ++kk) {
      const std::int64_t row = s.rowOffset(k0 + kk);
      for (std::int64_t u = 0; u < panels * kNv; ++u) out[u].put(kk, loadRuns<V>(s.data(), row, runs[u]));
    }
    for (std::int64_t u = 0; u < panels * kNv; ++u) out[u].finish(kc);
    return;
  }
  // S = B^T: rows j of S are contiguous in k; kL x kL blocks are transposed
  // in registers.
  Runs runs;
  RowSink<V, kPaired> out[kNv] = {
      {dst, nullptr, false, kNr}, {dst + kL, nullptr, false, kNr}, {dst + 2 * kL, nullptr, false, kNr}};
  std::int64_t row[kNr];
  for (std::int64_t j = 0; j < cols; ++j) row[j] = s.rowOffset(j0 + j);
  for (std::int64_t kb = 0; kb < kc; kb += kL) {
    s.columnRuns(k0 + kb, std::min(kL, kc - kb), runs);
    for (std::int64_t v = 0; v < kNv; ++v) {
      typename V::Reg r[kL];
      for (std::int64_t j = 0; j < kL; ++j) {
        const std::int64_t col = kL * v + j;
        r[j] = col < cols ? loadRuns<V>(s.data(), row[col], runs) : V::zero();
      }
      V::transpose(r);
      for (std::int64_t t = 0; t < std::min(kL, kc - kb); ++t) out[v].put(kb + t, r[t]);
    }
  }
  for (auto& o : out) o.finish(kc);
}

// Where a micro-kernel reads its kMr rows of op(A): a packed panel
// (element (i, kk) at panel[kk * kMr + i]), or straight from a row-major A
// that is not transposed (element (i, kk) at rows[i] + kk): a large A, used
// against few columns of B, then costs no packing pass (about a tenth of a
// [2048, 688] x [688, 256] product's time). Both give the kernel the same
// values in the same order.
struct PackedA {
  const float* panel;
};
template <std::int64_t kMr>
struct DirectA {
  const float* rows[kMr];
  // Rows [0, count) of A from `first`, ld floats apart; the tile's rows past
  // count (not stored) read row 0 again, so nothing past A is read.
  DirectA(const float* first, std::int64_t ld, std::int64_t count) {
    for (std::int64_t i = 0; i < kMr; ++i) rows[i] = first + (i < count ? i : 0) * ld;
  }
};

// C tile [rows <= kMr, cols <= kV * kLanes] (+)= op(A)'s kMr rows (Panel:
// PackedA or DirectA) * the first kV vectors of each row of a packed B
// panel, over kc k-rows (paired: ceil(kc / 2) rows of pairs, PackedA only).
// Kept out of line, and tileProduct inlined into its callers, whatever
// else calls them: with GCC's own choice, one more caller of gemm() made
// tileProduct a function with one micro-kernel inlined into it, and the
// small Llama trained 4% slower (fp32, 2 threads).
template <class V, bool kPaired, std::int64_t kV, class Panel>
[[gnu::noinline]] void microKernelOf(std::int64_t kc, const Panel& a, const float* __restrict bp, float* c,
                                    std::int64_t ldc, std::int64_t rows, std::int64_t cols, bool accumulate) {
  constexpr std::int64_t kL = V::kLanes, kMr = Tile<V>::kMr, kNr = Tile<V>::kNr;
  constexpr bool kDirect = !std::is_same_v<Panel, PackedA>;
  static_assert(!(kDirect && kPaired));
  using Reg = typename V::Reg;
  // Every loop over the tile's registers is one flat loop, fully unrolled,
  // so that every index into acc is a constant and acc lives in registers.
  // (GCC unrolls only innermost loops early enough for that; with a nested
  // or variable-index loop anywhere it kept acc in memory and stored all of
  // it on every k step: on AVX2 12 stores per 12 FMAs, 28% of the FMA peak.
  // Found with perf.)
  Reg acc[kMr][kV];
#pragma GCC unroll 64
  for (std::int64_t t = 0; t < kMr * kV; ++t) acc[t / kV][t % kV] = V::zero();
  const float* __restrict ap = nullptr;
  const float* ar[kMr];
  if constexpr (kDirect) {
#pragma GCC unroll 16
    for (std::int64_t i = 0; i < kMr; ++i) ar[i] = a.rows[i];
  } else {
    ap = a.panel;
  }
  const std::int64_t steps = packedRows<kPaired>(kc);
  for (std::int64_t kk = 0; kk < steps; ++kk, bp += kNr) {
    Reg bv[kV];
#pragma GCC unroll 4
    for (std::int64_t v = 0; v < kV; ++v) bv[v] = V::load(bp + kL * v);
#pragma GCC unroll 64
    for (std::int64_t t = 0; t < kMr * kV; ++t) {
      const std::int64_t i = t / kV, v = t % kV;
      Reg av;
      if constexpr (kDirect)
        av = V::broadcast(ar[i] + kk);
      else
        av = V::broadcast(ap + kk * kMr + i);
      if constexpr (kPaired)
        acc[i][v] = V::dotPairs(acc[i][v], av, bv[v]);
      else
        acc[i][v] = V::fmadd(av, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 64
  for (std::int64_t t = 0; t < kMr * kV; ++t) {
    const std::int64_t i = t / kV, v = t % kV;
    if (i >= rows) continue;
    float* out_p = c + i * ldc + kL * v;
    const std::uint32_t mask = laneMask(cols - kL * v);
    Reg out = acc[i][v];
    if (accumulate) out = V::add(out, V::loadLanes(V::zero(), mask, out_p));
    V::storeLanes(out_p, mask, out);
  }
}

// C tile [rows <= kMr, cols <= kNr] (+)= op(A)'s kMr rows * packed B panel,
// over kc k-rows: on as many of the panel's kNv vectors as cols needs, so
// that a narrow last panel (a 256-column product's 16 past five 48-column
// panels) costs the FMAs of its columns, not of a whole panel. Each element
// of C is summed in the same order whatever the width.
template <class V, bool kPaired, class Panel>
void microKernel(std::int64_t kc, const Panel& a, const float* __restrict bp, float* c, std::int64_t ldc,
                 std::int64_t rows, std::int64_t cols, bool accumulate) {
  static_assert(kNv == 3);
  if (cols > 2 * V::kLanes) return microKernelOf<V, kPaired, 3>(kc, a, bp, c, ldc, rows, cols, accumulate);
  if (cols > V::kLanes) return microKernelOf<V, kPaired, 2>(kc, a, bp, c, ldc, rows, cols, accumulate);
  microKernelOf<V, kPaired, 1>(kc, a, bp, c, ldc, rows, cols, accumulate);
}

// Whether the kernels read op(A) in place (DirectA) rather than packed:
// a plain, untransposed A of fp32 products.
template <class ASource, bool kPaired>
bool readsADirectly(bool trans_a) {
  return std::is_same_v<ASource, DenseSource> && !kPaired && !trans_a;
}

// microKernel on the tile's rows of A from `a_rows` (lda floats apart) in
// place when it is not null, else on the packed panel a_panel.
template <class V, bool kPaired>
[[gnu::always_inline]] inline void tileProduct(std::int64_t kc, const float* a_rows, std::int64_t lda,
                                               const float* a_panel, const float* bp, float* c, std::int64_t ldc,
                                               std::int64_t rows, std::int64_t cols, bool accumulate) {
  if constexpr (!kPaired) {
    if (a_rows != nullptr)
      return microKernel<V, false>(kc, DirectA<Tile<V>::kMr>(a_rows, lda, rows), bp, c, ldc, rows, cols, accumulate);
  }
  microKernel<V, kPaired>(kc, PackedA{a_panel}, bp, c, ldc, rows, cols, accumulate);
}

// C[m, n] (+)= op(A) * op(B) on this thread, A and B read through Sources.
template <class V, bool kPaired, class ASource, class BSource>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const ASource& a,
          const BSource& b, bool accumulate, float* c, std::int64_t ldc) {
  using T = Tile<V>;
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate)
      for (std::int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return;
  }
  const std::int64_t a_panels = (m + T::kMr - 1) / T::kMr;
  // A plain A that is not transposed is read in place (DirectA).
  const bool direct = readsADirectly<ASource, kPaired>(trans_a);
  float* a_pack = direct ? nullptr : scratch(1, kKc * a_panels * T::kMr);
  float* b_pack = scratch(0, kKc * T::kNc);
  for (std::int64_t k0 = 0; k0 < k; k0 += kKc) {
    const std::int64_t kc = std::min(kKc, k - k0), rows = packedRows<kPaired>(kc);
    const bool add = accumulate || k0 > 0;
    if (!direct) packA<V, kPaired>(trans_a, a, m, k0, kc, a_pack);
    for (std::int64_t j0 = 0; j0 < n; j0 += T::kNc) {
      const std::int64_t nc = std::min(T::kNc, n - j0), b_panels = (nc + T::kNr - 1) / T::kNr;
      for (std::int64_t jp = 0; jp < b_panels; ++jp)
        packB<V, kPaired>(trans_b, b, k0, kc, j0 + jp * T::kNr, std::min(T::kNr, nc - jp * T::kNr),
                          b_pack + jp * rows * T::kNr);
      for (std::int64_t ib = 0; ib < a_panels; ib += T::kMc / T::kMr)  // A blocks of kMc rows stay in L2
        for (std::int64_t jp = 0; jp < b_panels; ++jp)
          for (std::int64_t ip = ib; ip < std::min(a_panels, ib + T::kMc / T::kMr); ++ip) {
            // In place, A's rows (a DenseSource's row offsets are row * ld).
            const float* a_rows = direct ? a.data() + a.rowOffset(ip * T::kMr) + k0 : nullptr;
            tileProduct<V, kPaired>(kc, a_rows, a.rowOffset(1), a_pack + ip * rows * T::kMr,
                                    b_pack + jp * rows * T::kNr, c + ip * T::kMr * ldc + j0 + jp * T::kNr, ldc,
                                    std::min(T::kMr, m - ip * T::kMr), std::min(T::kNr, nc - jp * T::kNr), add);
          }
    }
  }
}

// Rows of C per part when m rows are shared out among `parts` in whole
// kMr-row panels (the last part takes what is left; a part may get none).
template <class V>
std::int64_t rowsPerPart(std::int64_t m, std::int64_t parts) {
  constexpr std::int64_t kMr = Tile<V>::kMr;
  return ((m + kMr - 1) / kMr + parts - 1) / parts * kMr;
}

// gemmThreaded's product of A [m, k] (not transposed) and op(B) when op(B)
// fits one phase, on `parts` threads: one task per thread, each running
// gemm() on its share of A's rows (whole panels) against all of op(B),
// packed by itself. The threads pack B twice, but none reads panels another
// packed (and writes over in the next call), and none waits between
// packing and products: an MLP at batch 256 trained 4% faster on 2 threads
// (157,237 -> 163,593 samples/s, 6 interleaved runs); the small Llama the
// same (1.00x fp32, 0.99x bf16-mixed). C's elements are summed as by
// gemm(): the same bits.
template <class V, bool kPaired>
void rowsWithOwnB(std::int64_t parts, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
                  const float* b, bool accumulate, float* c, const GemmEpilogue& epilogue) {
  static ParallelSite sites[2] = {ParallelSite(kPaired ? "gemm bf16 NN: rows" : "gemm NN: rows"),
                                  ParallelSite(kPaired ? "gemm bf16 NT: rows" : "gemm NT: rows")};
  const std::int64_t share = rowsPerPart<V>(m, parts);
  parallelTasks(sites[trans_b], parts, 2.0 * static_cast<double>(m * n * k), [&](std::int64_t t) {
    const std::int64_t i0 = std::min(m, t * share), rows = std::min(m, i0 + share) - i0;
    if (rows == 0) return;
    gemm<V, kPaired>(false, trans_b, rows, n, k, DenseSource{a + i0 * k, k}, DenseSource{b, trans_b ? k : n},
                     accumulate, c + i0 * n, n);
    if (!epilogue.empty()) applyEpilogue(epilogue, c, n, i0, rows, 0, n);
  });
}

// gemmThreaded's weight gradient C [m, n] (+)= A^T B (A [k, m], B [k, n], k
// the batch's rows) at any thread count: k cut in two halves (the first a
// multiple of 16 rows), each summed slice by slice from zero, C = (C +)
// first half + second half. On `parts` threads each half is shared out by
// C's rows among half the tasks, each task gemm() on its own packed panels:
// with rows dealt in order, a thread packs the batch rows the earlier
// kernels wrote on its core. A second call adds the second half, held in
// the caller's scratch, to C. (Shared out by C's rows alone, every thread
// packed half of the other core's batch rows. 2 threads, interleaved runs:
// the MLP at batch 256 163,593 -> 166,792 samples/s; the small Llama, whose
// 2048-token gradients were blocked by phases, 1.03x in fp32 and 1.06x in
// bf16-mixed.)
template <class V, bool kPaired>
void weightGradientHalves(std::int64_t parts, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
                          const float* b, bool accumulate, float* c) {
  static ParallelSite halves_site(kPaired ? "gemm bf16 TN: halves" : "gemm TN: halves");
  static ParallelSite sum_site(kPaired ? "gemm bf16 TN: sum" : "gemm TN: sum");
  const std::int64_t half = (k / 2 + 15) / 16 * 16;
  // C's rows [i0, i1) (+)= the product over k in [k0, k1), into out.
  const auto product = [&](std::int64_t k0, std::int64_t k1, std::int64_t i0, std::int64_t i1, bool add, float* out) {
    gemm<V, kPaired>(true, false, i1 - i0, n, k1 - k0, DenseSource{a + k0 * m + i0, m}, DenseSource{b + k0 * n, n},
                     add, out + i0 * n, n);
  };
  // One thread: a second half of one slice accumulates into C (the same
  // bits as adding it after); a longer one is summed apart, as on the team.
  if (parts == 1 && k - half <= kKc) {
    product(0, half, 0, m, accumulate, c);
    product(half, k, 0, m, true, c);
    return;
  }
  float* second = scratch(2, m * n);
  const std::int64_t per_half = (parts + 1) / 2, share = rowsPerPart<V>(m, per_half);
  parallelTasks(halves_site, 2 * per_half, 2.0 * static_cast<double>(m * n * k), [&](std::int64_t t) {
    const std::int64_t i0 = std::min(m, t % per_half * share), i1 = std::min(m, i0 + share);
    if (i1 == i0) return;
    t < per_half ? product(0, half, i0, i1, accumulate, c) : product(half, k, i0, i1, false, second);
  });
  parallelFor(sum_site, m * n, 1024, static_cast<double>(m * n), [&](std::int64_t e0, std::int64_t e1) {
    for (std::int64_t e = e0; e < e1; ++e) c[e] = c[e] + second[e];
  });
}

// gemm() of plain row-major A [m, k] (A^T when trans_a) and B on the
// intra-op threads. k is cut into phases of whole kKc slices whose packed A
// and B fit kPhaseFloats. A product of one phase whose A is not transposed
// goes to rowsWithOwnB (on more than one thread), a weight gradient (only A
// transposed, k >= 32, C up to kHalvesMaxFloats) to weightGradientHalves.
// Otherwise, per phase, two parallel calls: the threads pack
// op(A) and op(B), every slice of the phase, between them, once; then they
// share out C's blocks (rows by one B panel), each running its tiles slice
// by slice. No panel is packed twice and the tasks need no barrier.
template <class V, bool kPaired>
void gemmThreaded(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
                  const float* b, bool accumulate, float* c, const GemmEpilogue& epilogue) {
  using T = Tile<V>;
  // 2 MiB of packed operands, a core's L2, so that the panels a phase packs
  // are still there for its products (a weight gradient [688, 2048] x [2048,
  // 256] in phases of 8 MiB ran 8% slower on one thread, 5% on two).
  constexpr std::int64_t kPhaseFloats = std::int64_t{1} << 19;
  // The largest weight gradient summed in halves: its second half is held
  // in scratch (16 MiB; a 4096 x 11008 projection's would take 180 MB).
  constexpr std::int64_t kHalvesMaxFloats = std::int64_t{1} << 22;
  const std::int64_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
  if (m == 0 || n == 0 || k == 0) {
    gemm<V, kPaired>(trans_a, trans_b, m, n, k, DenseSource{a, lda}, DenseSource{b, ldb}, accumulate, c, n);
    if (!epilogue.empty()) applyEpilogue(epilogue, c, n, 0, m, 0, n);
    return;
  }
  // One site per transpose pair: a Linear layer's three products (forward
  // NT, weight gradient TN, input gradient NN) have their own costs.
  static ParallelSite pack_sites[4] = {ParallelSite(kPaired ? "gemm bf16 NN: pack" : "gemm NN: pack"),
                                       ParallelSite(kPaired ? "gemm bf16 NT: pack" : "gemm NT: pack"),
                                       ParallelSite(kPaired ? "gemm bf16 TN: pack" : "gemm TN: pack"),
                                       ParallelSite(kPaired ? "gemm bf16 TT: pack" : "gemm TT: pack")};
  static ParallelSite sites[4] = {
      ParallelSite(kPaired ? "gemm bf16 NN" : "gemm NN"), ParallelSite(kPaired ? "gemm bf16 NT" : "gemm NT"),
      ParallelSite(kPaired ? "gemm bf16 TN" : "gemm TN"), ParallelSite(kPaired ? "gemm bf16 TT" : "gemm TT")};
  const int which = 2 * trans_a + trans_b;
  const std::int64_t slice_rows = packedRows<kPaired>(kKc);
  const std::int64_t a_panels = (m + T::kMr - 1) / T::kMr, b_panels = (n + T::kNr - 1) / T::kNr;
  // Pack units: A's rows in runs of a_rows (two A panels, or when trans_a the
  // panels that share A^T's cache lines), B's panels in runs of b_unit (when
  // !trans_b the panels that share B's lines).
  const std::int64_t a_rows = V::kLanes * (trans_a ? kPairsPerLine<V> : 1);
  const std::int64_t b_unit = trans_b ? 1 : kBPanelsPerLines<V>;
  // A read in place (DirectA) has no pack units.
  const bool direct = readsADirectly<DenseSource, kPaired>(trans_a);
  const std::int64_t groups = direct ? 0 : (m + a_rows - 1) / a_rows, b_units = (b_panels + b_unit - 1) / b_unit;
  const std::int64_t a_slice = direct ? 0 : a_panels * T::kMr * slice_rows, b_slice = b_panels * T::kNr * slice_rows;
  const std::int64_t slices = (k + kKc - 1) / kKc;
  const std::int64_t per_phase = std::clamp<std::int64_t>(kPhaseFloats / (a_slice + b_slice), 1, slices);
  const int threads_now = intraOpThreadsNow();
  if (per_phase == slices && !trans_a && threads_now > 1)
    return rowsWithOwnB<V, kPaired>(threads_now, trans_b, m, n, k, a, b, accumulate, c, epilogue);
  if (trans_a && !trans_b && k >= 32 && m * n <= kHalvesMaxFloats && epilogue.empty())
    return weightGradientHalves<V, kPaired>(threads_now, m, n, k, a, b, accumulate, c);
  float* a_pack = direct ? nullptr : scratch(1, per_phase * a_slice);
  float* b_pack = scratch(0, per_phase * b_slice);
  // Blocks of C: at most kMc rows; smaller when B has few panels, so that
  // every thread gets several tasks.
  const std::int64_t parts = intraOpThreads();
  const std::int64_t want = 4 * parts;
  const std::int64_t row_blocks =
      std::clamp((want + b_panels - 1) / b_panels, (a_panels + T::kMc / T::kMr - 1) / (T::kMc / T::kMr), a_panels);
  const std::int64_t block_panels = (a_panels + row_blocks - 1) / row_blocks;
  const std::int64_t blocks = (a_panels + block_panels - 1) / block_panels;
  // The pack tasks' units (an A group or a B unit, each over every slice of
  // a phase), in `parts` runs of consecutive units, one per thread, each its
  // share of A's groups then of B's units: the team deals each thread a
  // contiguous range of tasks (threading.h), so a thread packs about the rows
  // of A it computes C's rows with next, and that the previous kernel wrote
  // on its core. Unit u is A group g (< groups) or B unit g - groups.
  const auto packUnit = [&](std::int64_t u) {
    for (std::int64_t p = 0;; ++p) {
      const std::int64_t a0 = p * groups / parts, a1 = (p + 1) * groups / parts;
      const std::int64_t b0 = p * b_units / parts, b1 = (p + 1) * b_units / parts;
      const std::int64_t start = a0 + b0, size = (a1 - a0) + (b1 - b0);
      if (u < start + size) return u - start < a1 - a0 ? a0 + (u - start) : groups + b0 + (u - start - (a1 - a0));
    }
  };
  for (std::int64_t s0 = 0; s0 < slices; s0 += per_phase) {
    const std::int64_t phase = std::min(per_phase, slices - s0);
    const std::int64_t k_phase = std::min(k, (s0 + phase) * kKc) - s0 * kKc;
    parallelTasks(pack_sites[which], (groups + b_units) * phase, static_cast<double>((m + n) * k_phase),
                  [&](std::int64_t t) {
                    const std::int64_t s = t % phase, g = packUnit(t / phase);
                    const std::int64_t k0 = (s0 + s) * kKc, kc = std::min(kKc, k - k0), rows = packedRows<kPaired>(kc);
                    if (g < groups) {
                      const std::int64_t i0 = g * a_rows;
                      packA<V, kPaired>(trans_a, DenseSource{trans_a ? a + i0 : a + i0 * lda, lda},
                                        std::min(a_rows, m - i0), k0, kc,
                                        a_pack + s * a_slice + i0 / T::kMr * rows * T::kMr);
                    } else {
                      const std::int64_t jp = (g - groups) * b_unit;
                      packB<V, kPaired>(trans_b, DenseSource{b, ldb}, k0, kc, jp * T::kNr,
                                        std::min(b_unit * T::kNr, n - jp * T::kNr),
                                        b_pack + s * b_slice + jp * rows * T::kNr);
                    }
                  });
    parallelTasks(sites[which], blocks * b_panels, 2.0 * static_cast<double>(m * n * k_phase), [&](std::int64_t t) {
      const std::int64_t ib = t / b_panels, jp = t % b_panels;
      const std::int64_t j0 = jp * T::kNr, cols = std::min(T::kNr, n - j0);
      for (std::int64_t s = 0; s < phase; ++s) {
        const std::int64_t k0 = (s0 + s) * kKc, kc = std::min(kKc, k - k0), rows = packedRows<kPaired>(kc);
        const float* bp = b_pack + s * b_slice + jp * rows * T::kNr;
        for (std::int64_t ip = ib * block_panels; ip < std::min(a_panels, (ib + 1) * block_panels); ++ip) {
          tileProduct<V, kPaired>(kc, direct ? a + ip * T::kMr * lda + k0 : nullptr, lda,
                                  a_pack + s * a_slice + ip * rows * T::kMr, bp, c + ip * T::kMr * n + j0, n,
                                  std::min(T::kMr, m - ip * T::kMr), cols, accumulate || k0 > 0);
        }
      }
      if (s0 + phase == slices && !epilogue.empty()) {  // the block is final
        const std::int64_t i0 = ib * block_panels * T::kMr;
        applyEpilogue(epilogue, c, n, i0, std::min(block_panels * T::kMr, m - i0), j0, cols);
      }
    });
  }
}

}  // namespace hpu::device::kernels::packed
