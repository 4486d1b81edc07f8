// The IsaKernels table of the packed kernels on vector type V (kPaired:
// bf16 operands as pairs). Include like packed_gemm.h: after the standard
// headers, under the instruction set's `#pragma GCC target`.
#pragma once

#include "kernels.h"
#include "packed_gemm.h"

namespace hpu::device::kernels::packed {

template <class V, bool kPaired>
void denseGemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
               const float* b, std::int64_t ldb, bool accumulate, float* c, std::int64_t ldc) {
  gemm<V, kPaired>(ta, tb, m, n, k, DenseSource{a, lda}, DenseSource{b, ldb}, accumulate, c, ldc);
}

template <class V>
struct ConvProducts {
  static void forward(const ConvGeometry& g, const float* xp, std::int64_t nc, std::int64_t k, const float* w,
                      float* out) {
    gemm<V, false>(false, false, k, nc * g.p(), g.crs(), DenseSource{w, g.crs()}, ImageColumns(g, xp), false, out,
                   nc * g.p());
  }
  // dW [k, crs] = dY col^T, or, where it fills the register tiles better
  // (few input taps: a 1-channel first layer's 9), dW^T = col dY^T
  // transposed.
  static void weight(const ConvGeometry& g, const float* xp, const float* dy, std::int64_t nc, std::int64_t k,
                     float* dw) {
    const std::int64_t crs = g.crs(), K = nc * g.p();
    if (tileUse(crs, k) <= tileUse(k, crs))
      return gemm<V, false>(false, true, k, crs, K, ChannelRows(dy, k, g.p()), ImageColumns(g, xp), false, dw, crs);
    thread_local std::vector<float> dw_t;
    dw_t.resize(static_cast<std::size_t>(crs * k));
    gemm<V, false>(false, true, crs, k, K, ImageColumns(g, xp), ChannelRows(dy, k, g.p()), false, dw_t.data(), k);
    for (std::int64_t kk = 0; kk < k; ++kk)
      for (std::int64_t t = 0; t < crs; ++t) dw[kk * crs + t] = dw_t[static_cast<std::size_t>(t * k + kk)];
  }
  // The share of the register tiles an m x n product fills.
  static double tileUse(std::int64_t m, std::int64_t n) {
    using T = Tile<V>;
    const auto round_up = [](std::int64_t v, std::int64_t to) { return (v + to - 1) / to * to; };
    return static_cast<double>(m * n) / static_cast<double>(round_up(m, T::kMr) * round_up(n, T::kNr));
  }
  static void input(const ConvGeometry& g, const float* w, const float* dy, std::int64_t nc, std::int64_t k,
                    float* col) {
    gemm<V, false>(true, false, g.crs(), nc * g.p(), k, DenseSource{w, g.crs()}, ChannelRows(dy, k, g.p()), false, col,
                   nc * g.p());
  }
};

template <class V, bool kPaired>
constexpr IsaKernels kernelsOf() {
  if constexpr (kPaired)
    return {&denseGemm<V, true>, &gemmThreaded<V, true>, nullptr, nullptr, nullptr, nullptr};
  else
    return {&denseGemm<V, false>,     &gemmThreaded<V, false>, &ConvProducts<V>::forward, &ConvProducts<V>::weight,
            &ConvProducts<V>::input, nullptr};
}

}  // namespace hpu::device::kernels::packed
