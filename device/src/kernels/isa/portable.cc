// The portable kernels, for any x86-64 CPU (and any other): Eigen's
// products, built for the baseline instruction set. Convolutions multiply
// a materialised column matrix (im2col).
#include <Eigen/Core>
#include <algorithm>
#include <vector>

#include "hpu/device/threading.h"
#include "kernels.h"

namespace hpu::device::kernels {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Strided = Eigen::Map<RowMajor, 0, Eigen::OuterStride<>>;
using ConstStrided = Eigen::Map<const RowMajor, 0, Eigen::OuterStride<>>;

void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
          const float* b, std::int64_t ldb, bool accumulate, float* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  Strided C(c, m, n, Eigen::OuterStride<>(ldc));
  const ConstStrided A(a, ta ? k : m, ta ? m : k, Eigen::OuterStride<>(lda));
  const ConstStrided B(b, tb ? n : k, tb ? k : n, Eigen::OuterStride<>(ldb));
  const auto run = [&](const auto& lhs, const auto& rhs) {
    if (accumulate)
      C.noalias() += lhs * rhs;
    else
      C.noalias() = lhs * rhs;
  };
  if (ta && tb)
    run(A.transpose(), B.transpose());
  else if (ta)
    run(A.transpose(), B);
  else if (tb)
    run(A, B.transpose());
  else
    run(A, B);
}

// Blocks of kBlockRows rows of C, one Eigen product each: the blocks do not
// depend on the thread count, nor do the bits.
void gemmThreaded(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b,
                  bool accumulate, float* c, const GemmEpilogue& epilogue) {
  constexpr std::int64_t kBlockRows = 64;
  static ParallelSite site("gemm (Eigen)");
  const std::int64_t lda = ta ? m : k, ldb = tb ? k : n;
  parallelTasks(site, (m + kBlockRows - 1) / kBlockRows, 2.0 * static_cast<double>(m * n * k), [&](std::int64_t t) {
    const std::int64_t i0 = t * kBlockRows, rows = std::min(kBlockRows, m - i0);
    gemm(ta, tb, rows, n, k, ta ? a + i0 : a + i0 * lda, lda, b, ldb, accumulate, c + i0 * n, n);
    if (!epilogue.empty()) applyEpilogue(epilogue, c, n, i0, rows, 0, n);
  });
}

float* workspace(int which, std::int64_t floats) {
  thread_local std::vector<float> buffers[2];
  auto& v = buffers[which];
  if (static_cast<std::int64_t>(v.size()) < floats) v.resize(static_cast<std::size_t>(floats));
  return v.data();
}

// col [crs, nc * p]: the column matrix of nc padded images (im2col).
const float* columnMatrix(const ConvGeometry& g, const float* xp, std::int64_t nc) {
  const std::int64_t ld = nc * g.p(), hp = g.paddedH(), wp = g.paddedW();
  float* col = workspace(1, g.crs() * ld);
  for (std::int64_t n = 0; n < nc; ++n)
    for (std::int64_t c = 0; c < g.c; ++c)
      for (std::int64_t i = 0; i < g.r; ++i)
        for (std::int64_t j = 0; j < g.s; ++j) {
          float* row = col + ((c * g.r + i) * g.s + j) * ld + n * g.p();
          for (std::int64_t oy = 0; oy < g.oh; ++oy) {
            const float* src = xp + n * g.paddedFloats() + (c * hp + oy * g.stride + i) * wp + j;
            float* dst = row + oy * g.ow;
            for (std::int64_t ox = 0; ox < g.ow; ++ox) dst[ox] = src[ox * g.stride];
          }
        }
  return col;
}

// dY [k, nc * p] from the [image, k, p] layout.
const float* gradientMatrix(const float* dy, std::int64_t nc, std::int64_t k, std::int64_t p) {
  float* dyk = workspace(0, k * nc * p);
  for (std::int64_t i = 0; i < nc; ++i)
    for (std::int64_t kk = 0; kk < k; ++kk)
      std::copy(dy + (i * k + kk) * p, dy + (i * k + kk + 1) * p, dyk + kk * nc * p + i * p);
  return dyk;
}

void convForward(const ConvGeometry& g, const float* xp, std::int64_t nc, std::int64_t k, const float* w, float* out) {
  const std::int64_t ld = nc * g.p();
  gemm(false, false, k, ld, g.crs(), w, g.crs(), columnMatrix(g, xp, nc), ld, false, out, ld);
}
void convWeight(const ConvGeometry& g, const float* xp, const float* dy, std::int64_t nc, std::int64_t k, float* dw) {
  const std::int64_t ld = nc * g.p();
  gemm(false, true, k, g.crs(), ld, gradientMatrix(dy, nc, k, g.p()), ld, columnMatrix(g, xp, nc), ld, false, dw,
       g.crs());
}
void convInput(const ConvGeometry& g, const float* w, const float* dy, std::int64_t nc, std::int64_t k, float* col) {
  const std::int64_t ld = nc * g.p();
  gemm(true, false, g.crs(), ld, k, w, g.crs(), gradientMatrix(dy, nc, k, g.p()), ld, false, col, ld);
}

}  // namespace

const IsaKernels kPortableKernels = {&gemm, &gemmThreaded, &convForward, &convWeight, &convInput, nullptr};

}  // namespace hpu::device::kernels
