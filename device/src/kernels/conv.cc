#include "hpu/device/kernels/conv.h"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <vector>

namespace hpu::device::kernels {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<RowMajor>;
using ConstMap = Eigen::Map<const RowMajor>;

struct Geom {
  std::int64_t c, h, w, r, s, stride, pad, oh, ow;
  std::int64_t crs() const { return c * r * s; }
  std::int64_t p() const { return oh * ow; }
};

Geom geomOf(const Conv2dShape& g) { return {g.c, g.h, g.w, g.r, g.s, g.stride, g.pad, g.outH(), g.outW()}; }

// The output columns [lo, hi) whose input column ox*stride + j - pad lies in
// [0, w): the rest read zero padding.
inline void validColumns(const Geom& g, std::int64_t j, std::int64_t& lo, std::int64_t& hi) {
  const std::int64_t off = j - g.pad;
  lo = off >= 0 ? 0 : (-off + g.stride - 1) / g.stride;
  hi = g.w - off <= 0 ? 0 : std::min(g.ow, (g.w - off + g.stride - 1) / g.stride);
  lo = std::min(lo, hi);
}

// col[(c*r+i)*s+j][oy*ow+ox] = x[c][oy*stride+i-pad][ox*stride+j-pad] (0 outside).
void im2col(const Geom& g, const float* x, float* col) {
  for (std::int64_t c = 0; c < g.c; ++c)
    for (std::int64_t i = 0; i < g.r; ++i)
      for (std::int64_t j = 0; j < g.s; ++j) {
        float* row = col + ((c * g.r + i) * g.s + j) * g.p();
        std::int64_t lo, hi;
        validColumns(g, j, lo, hi);
        const std::int64_t off = j - g.pad;
        for (std::int64_t oy = 0; oy < g.oh; ++oy) {
          const std::int64_t iy = oy * g.stride + i - g.pad;
          float* dst = row + oy * g.ow;
          if (iy < 0 || iy >= g.h) {
            std::fill(dst, dst + g.ow, 0.0f);
            continue;
          }
          const float* src = x + (c * g.h + iy) * g.w + off;
          std::fill(dst, dst + lo, 0.0f);
          if (g.stride == 1)
            std::copy(src + lo, src + hi, dst + lo);
          else
            for (std::int64_t ox = lo; ox < hi; ++ox) dst[ox] = src[ox * g.stride];
          std::fill(dst + hi, dst + g.ow, 0.0f);
        }
      }
}

void col2imAdd(const Geom& g, const float* col, float* x) {
  for (std::int64_t c = 0; c < g.c; ++c)
    for (std::int64_t i = 0; i < g.r; ++i)
      for (std::int64_t j = 0; j < g.s; ++j) {
        const float* row = col + ((c * g.r + i) * g.s + j) * g.p();
        std::int64_t lo, hi;
        validColumns(g, j, lo, hi);
        const std::int64_t off = j - g.pad;
        for (std::int64_t oy = 0; oy < g.oh; ++oy) {
          const std::int64_t iy = oy * g.stride + i - g.pad;
          if (iy < 0 || iy >= g.h) continue;
          float* __restrict dst = x + (c * g.h + iy) * g.w + off;
          const float* __restrict src = row + oy * g.ow;
          if (g.stride == 1)
            for (std::int64_t ox = lo; ox < hi; ++ox) dst[ox] += src[ox];
          else
            for (std::int64_t ox = lo; ox < hi; ++ox) dst[ox * g.stride] += src[ox];
        }
      }
}

// Runs the batch's images on the OpenMP threads with Eigen single-threaded
// inside (many small GEMMs parallelise better across images than within).
template <class Body>
void perImage(std::int64_t n, Body body) {
  const int outer_eigen = Eigen::nbThreads();
  Eigen::setNbThreads(1);
#pragma omp parallel
  body(omp_get_thread_num(), omp_get_num_threads());
  Eigen::setNbThreads(outer_eigen);
  (void)n;
}

}  // namespace

void conv2dForward(const Conv2dShape& shape, const float* x, const float* w, const float* b, float* y) {
  const Geom g = geomOf(shape);
  const std::int64_t in_stride = g.c * g.h * g.w, out_stride = shape.k * g.p();
  perImage(shape.n, [&](int, int) {
    std::vector<float> col(static_cast<std::size_t>(g.crs() * g.p()));
#pragma omp for schedule(static)
    for (std::int64_t n = 0; n < shape.n; ++n) {
      im2col(g, x + n * in_stride, col.data());
      Map Y(y + n * out_stride, shape.k, g.p());
      Y.noalias() = ConstMap(w, shape.k, g.crs()) * ConstMap(col.data(), g.crs(), g.p());
      if (b != nullptr) Y.colwise() += Eigen::Map<const Eigen::VectorXf>(b, shape.k);
    }
  });
}

void conv2dBackward(const Conv2dShape& shape, const float* x, const float* w, const float* dy, float* dx,
                    bool accumulate_dx, float* dw, bool accumulate_dw, float* db, bool accumulate_db) {
  const Geom g = geomOf(shape);
  const std::int64_t in_stride = g.c * g.h * g.w, out_stride = shape.k * g.p();
  if (db != nullptr) {
    std::vector<float> sums(static_cast<std::size_t>(shape.k), 0.0f);
    for (std::int64_t n = 0; n < shape.n; ++n)
      for (std::int64_t k = 0; k < shape.k; ++k)
        sums[static_cast<std::size_t>(k)] += Eigen::Map<const Eigen::VectorXf>(dy + n * out_stride + k * g.p(), g.p()).sum();
    for (std::int64_t k = 0; k < shape.k; ++k) db[k] = (accumulate_db ? db[k] : 0.0f) + sums[static_cast<std::size_t>(k)];
  }
  if (dx != nullptr && !accumulate_dx) std::fill(dx, dx + shape.n * in_stride, 0.0f);
  // Each thread sums its images' weight gradients; the partial sums are then
  // added in thread order, so the result depends only on the thread count.
  std::vector<RowMajor> partial;
  perImage(shape.n, [&](int t, int threads) {
#pragma omp single
    partial.assign(static_cast<std::size_t>(dw != nullptr ? threads : 0), RowMajor::Zero(shape.k, g.crs()));
    std::vector<float> col(static_cast<std::size_t>(dw != nullptr ? g.crs() * g.p() : 0));
    std::vector<float> dcol(static_cast<std::size_t>(dx != nullptr ? g.crs() * g.p() : 0));
#pragma omp for schedule(static)
    for (std::int64_t n = 0; n < shape.n; ++n) {
      const ConstMap dY(dy + n * out_stride, shape.k, g.p());
      if (dw != nullptr) {
        im2col(g, x + n * in_stride, col.data());
        partial[static_cast<std::size_t>(t)].noalias() += dY * ConstMap(col.data(), g.crs(), g.p()).transpose();
      }
      if (dx != nullptr) {
        Map(dcol.data(), g.crs(), g.p()).noalias() = ConstMap(w, shape.k, g.crs()).transpose() * dY;
        col2imAdd(g, dcol.data(), dx + n * in_stride);
      }
    }
  });
  if (dw != nullptr) {
    Map DW(dw, shape.k, g.crs());
    if (!accumulate_dw) DW.setZero();
    for (const RowMajor& p : partial) DW += p;
  }
}

}  // namespace hpu::device::kernels
