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
// `ld` is the row stride of col (p() for one image; more when images sit
// side by side in one matrix).
void im2col(const Geom& g, const float* x, float* col, std::int64_t ld) {
  for (std::int64_t c = 0; c < g.c; ++c)
    for (std::int64_t i = 0; i < g.r; ++i)
      for (std::int64_t j = 0; j < g.s; ++j) {
        float* row = col + ((c * g.r + i) * g.s + j) * ld;
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

void col2imAdd(const Geom& g, const float* col, std::int64_t ld, float* x) {
  for (std::int64_t c = 0; c < g.c; ++c)
    for (std::int64_t i = 0; i < g.r; ++i)
      for (std::int64_t j = 0; j < g.s; ++j) {
        const float* row = col + ((c * g.r + i) * g.s + j) * ld;
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

// Images per GEMM: enough that each product is a good size, few enough that
// a chunk's column matrix stays in the core's cache (kChunkFloats).
constexpr std::int64_t kChunkFloats = 1 << 18;

// Scratch matrices reused across calls on this thread (no allocation or page
// faults per step); grown on demand.
float* workspace(int which, std::int64_t floats) {
  thread_local std::vector<float> buffers[3];
  auto& b = buffers[which];
  if (static_cast<std::int64_t>(b.size()) < floats) b.resize(static_cast<std::size_t>(floats));
  return b.data();
}

struct Chunks {
  std::int64_t size, count;
};
Chunks chunksOf(const Geom& g, std::int64_t n) {
  const std::int64_t size = std::clamp<std::int64_t>(kChunkFloats / std::max<std::int64_t>(1, g.crs() * g.p()), 1, n);
  return {size, (n + size - 1) / size};
}

// Runs body(chunk) for every chunk on the OpenMP threads, Eigen
// single-threaded inside (independent mid-sized products parallelise better
// than each product alone).
template <class Body>
void forChunks(const Chunks& chunks, Body body) {
  const int outer = Eigen::nbThreads();
  Eigen::setNbThreads(1);
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks.count; ++c) body(c, omp_get_thread_num());
  Eigen::setNbThreads(outer);
}

}  // namespace

void conv2dForward(const Conv2dShape& shape, const float* x, const float* w, const float* b, float* y) {
  const Geom g = geomOf(shape);
  const std::int64_t in_stride = g.c * g.h * g.w, p = g.p(), k = shape.k;
  const Chunks chunks = chunksOf(g, shape.n);
  forChunks(chunks, [&](std::int64_t c, int) {
    const std::int64_t n0 = c * chunks.size, nc = std::min(chunks.size, shape.n - n0), ld = nc * p;
    float* col = workspace(0, g.crs() * ld);
    float* out = workspace(1, k * ld);
    for (std::int64_t i = 0; i < nc; ++i) im2col(g, x + (n0 + i) * in_stride, col + i * p, ld);
    Map(out, k, ld).noalias() = ConstMap(w, k, g.crs()) * ConstMap(col, g.crs(), ld);
    // [k, image, p] -> [image, k, p], adding the bias.
    for (std::int64_t i = 0; i < nc; ++i)
      for (std::int64_t kk = 0; kk < k; ++kk) {
        const float* src = out + kk * ld + i * p;
        float* dst = y + ((n0 + i) * k + kk) * p;
        const float bias = b != nullptr ? b[kk] : 0.0f;
        for (std::int64_t q = 0; q < p; ++q) dst[q] = src[q] + bias;
      }
  });
}

void conv2dBackward(const Conv2dShape& shape, const float* x, const float* w, const float* dy, float* dx,
                    bool accumulate_dx, float* dw, bool accumulate_dw, float* db, bool accumulate_db) {
  const Geom g = geomOf(shape);
  const std::int64_t in_stride = g.c * g.h * g.w, p = g.p(), k = shape.k;
  const Chunks chunks = chunksOf(g, shape.n);
  if (db != nullptr) {
    std::vector<double> sums(static_cast<std::size_t>(k), 0.0);
    for (std::int64_t n = 0; n < shape.n; ++n)
      for (std::int64_t kk = 0; kk < k; ++kk) {
        const float* row = dy + (n * k + kk) * p;
        double s = 0;
        for (std::int64_t q = 0; q < p; ++q) s += row[q];
        sums[static_cast<std::size_t>(kk)] += s;
      }
    for (std::int64_t kk = 0; kk < k; ++kk)
      db[kk] = (accumulate_db ? db[kk] : 0.0f) + static_cast<float>(sums[static_cast<std::size_t>(kk)]);
  }
  if (dx != nullptr && !accumulate_dx) std::fill(dx, dx + shape.n * in_stride, 0.0f);
  // Weight gradients: one partial sum per chunk, added in chunk order, so the
  // result does not depend on the thread count.
  std::vector<float> partial(static_cast<std::size_t>(dw != nullptr ? chunks.count * k * g.crs() : 0));
  forChunks(chunks, [&](std::int64_t c, int) {
    const std::int64_t n0 = c * chunks.size, nc = std::min(chunks.size, shape.n - n0), ld = nc * p;
    float* dyk = workspace(0, k * ld);
    float* col = workspace(1, g.crs() * ld);
    // [image, k, p] -> [k, image, p]: the chunk's columns side by side.
    for (std::int64_t i = 0; i < nc; ++i)
      for (std::int64_t kk = 0; kk < k; ++kk)
        std::copy(dy + ((n0 + i) * k + kk) * p, dy + ((n0 + i) * k + kk + 1) * p, dyk + kk * ld + i * p);
    const ConstMap dY(dyk, k, ld);
    if (dw != nullptr) {
      for (std::int64_t i = 0; i < nc; ++i) im2col(g, x + (n0 + i) * in_stride, col + i * p, ld);
      Map(partial.data() + c * k * g.crs(), k, g.crs()).noalias() = dY * ConstMap(col, g.crs(), ld).transpose();
    }
    if (dx != nullptr) {
      Map(col, g.crs(), ld).noalias() = ConstMap(w, k, g.crs()).transpose() * dY;
      for (std::int64_t i = 0; i < nc; ++i) col2imAdd(g, col + i * p, ld, dx + (n0 + i) * in_stride);
    }
  });
  if (dw != nullptr) {
    Map DW(dw, k, g.crs());
    if (!accumulate_dw) DW.setZero();
    for (std::int64_t c = 0; c < chunks.count; ++c) DW += ConstMap(partial.data() + c * k * g.crs(), k, g.crs());
  }
}

}  // namespace hpu::device::kernels
