#include "hpu/device/kernels/conv.h"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <vector>

#include "hpu/device/kernels/gemm.h"
#include "lane_mask.h"
#include "packed_gemm.h"

namespace hpu::device::kernels {
namespace {

struct Geom {
  std::int64_t c, h, w, r, s, stride, pad, oh, ow;
  std::int64_t crs() const { return c * r * s; }
  std::int64_t p() const { return oh * ow; }
};

Geom geomOf(const Conv2dShape& g) { return {g.c, g.h, g.w, g.r, g.s, g.stride, g.pad, g.outH(), g.outW()}; }

// Each image is first copied into a zero-bordered scratch image (`pad` zeros
// around every channel): the column matrix then reads it without bounds
// checks, from L1.
std::int64_t paddedH(const Geom& g) { return g.h + 2 * g.pad; }
std::int64_t paddedW(const Geom& g) { return g.w + 2 * g.pad; }
std::int64_t paddedFloats(const Geom& g) { return g.c * paddedH(g) * paddedW(g); }

void padImage(const Geom& g, const float* x, float* xp) {
  const std::int64_t hp = paddedH(g), wp = paddedW(g);
  std::fill(xp, xp + paddedFloats(g), 0.0f);
  for (std::int64_t c = 0; c < g.c; ++c)
    for (std::int64_t y = 0; y < g.h; ++y) {
      const float* src = x + (c * g.h + y) * g.w;
      std::copy(src, src + g.w, xp + (c * hp + y + g.pad) * wp + g.pad);
    }
}

#if defined(__AVX512F__)
// The column matrix of a chunk's padded images (im2col's layout, [crs, ld])
// as a packed::Source, read straight from the images:
// S[(c*r+i)*s+j][image*p + oy*ow + ox] = xp[image][c][oy*stride+i][ox*stride+j],
// image n's padded copy at xp + n * paddedFloats(g).
class ImageColumns {
 public:
  ImageColumns(const Geom& g, const float* xp) : g_(g), xp_(xp), hp_(paddedH(g)), wp_(paddedW(g)) {}

  const float* data() const { return xp_; }
  std::int64_t rowOffset(std::int64_t row) const {
    const std::int64_t c = row / (g_.r * g_.s), tap = row % (g_.r * g_.s);
    return (c * hp_ + tap / g_.s) * wp_ + tap % g_.s;
  }
  // A run per stretch of one output row (stride 1), else a run per lane.
  void columnRuns(std::int64_t col0, std::int64_t count, packed::Runs& runs) const {
    const std::int64_t p = g_.p();
    std::int64_t image = col0 / p, oy = col0 % p / g_.ow, ox = col0 % p % g_.ow;
    runs.count = 0;
    for (std::int64_t lane = 0; lane < count;) {
      const std::int64_t len = g_.stride == 1 ? std::min(g_.ow - ox, count - lane) : 1;
      runs.mask[runs.count] = laneRange(lane, lane + len);
      runs.offset[runs.count++] = image * paddedFloats(g_) + oy * g_.stride * wp_ + ox * g_.stride - lane;
      lane += len;
      ox += len;
      if (ox == g_.ow) {
        ox = 0;
        if (++oy == g_.oh) oy = 0, ++image;
      }
    }
  }

 private:
  Geom g_;
  const float* xp_;
  std::int64_t hp_, wp_;
};

// The [image, k, p] tensor of a chunk's nc images as the matrix [k, nc * p]
// (the images' pixels side by side), as a packed::Source.
class ChannelRows {
 public:
  ChannelRows(const float* t, std::int64_t k, std::int64_t p) : t_(t), k_(k), p_(p) {}

  const float* data() const { return t_; }
  std::int64_t rowOffset(std::int64_t row) const { return row * p_; }
  void columnRuns(std::int64_t col0, std::int64_t count, packed::Runs& runs) const {
    runs.count = 0;
    for (std::int64_t lane = 0, col = col0; lane < count;) {
      const std::int64_t image = col / p_, q = col % p_, len = std::min(p_ - q, count - lane);
      runs.mask[runs.count] = laneRange(lane, lane + len);
      runs.offset[runs.count++] = image * k_ * p_ + q - lane;
      lane += len;
      col += len;
    }
  }

 private:
  const float* t_;
  std::int64_t k_, p_;
};
#else
// col[(c*r+i)*s+j][oy*ow+ox] = xp[c][oy*stride+i][ox*stride+j] from the padded
// image xp. `ld` is the row stride of col (p() for one image; more when
// images sit side by side in one matrix).
void im2col(const Geom& g, const float* xp, float* col, std::int64_t ld) {
  const std::int64_t hp = paddedH(g), wp = paddedW(g);
  for (std::int64_t c = 0; c < g.c; ++c)
    for (std::int64_t i = 0; i < g.r; ++i)
      for (std::int64_t j = 0; j < g.s; ++j) {
        float* row = col + ((c * g.r + i) * g.s + j) * ld;
        for (std::int64_t oy = 0; oy < g.oh; ++oy) {
          const float* src = xp + (c * hp + oy * g.stride + i) * wp + j;
          float* dst = row + oy * g.ow;
          for (std::int64_t ox = 0; ox < g.ow; ++ox) dst[ox] = src[ox * g.stride];
        }
      }
}
#endif

// The adjoint of im2col: dx[c][y][x] (+)= the sum, over the kernel taps
// (i, j) in order, of col[(c*r+i)*s+j][oy*ow+ox] where oy*stride + i - pad = y
// and ox*stride + j - pad = x. Each element of dx is written once.
void col2im(const Geom& g, const float* col, std::int64_t ld, float* dx, bool accumulate) {
  auto tap = [&](std::int64_t c, std::int64_t i, std::int64_t j) { return col + ((c * g.r + i) * g.s + j) * ld; };
#if defined(__AVX512F__)
  if (g.stride == 1) {
    for (std::int64_t c = 0; c < g.c; ++c)
      for (std::int64_t y = 0; y < g.h; ++y)
        for (std::int64_t x0 = 0; x0 < g.w; x0 += 16) {
          float* out = dx + (c * g.h + y) * g.w + x0;
          const __mmask16 lanes = laneMask(g.w - x0);
          __m512 v = accumulate ? _mm512_maskz_loadu_ps(lanes, out) : _mm512_setzero_ps();
          for (std::int64_t i = 0; i < g.r; ++i) {
            const std::int64_t oy = y + g.pad - i;
            if (oy < 0 || oy >= g.oh) continue;
            for (std::int64_t j = 0; j < g.s; ++j) {
              const std::int64_t ox0 = x0 + g.pad - j;  // lane 0's output column
              const __mmask16 m = lanes & laneRange(-ox0, g.ow - ox0);
              v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, tap(c, i, j) + oy * g.ow + ox0));
            }
          }
          _mm512_mask_storeu_ps(out, lanes, v);
        }
    return;
  }
#endif
  for (std::int64_t c = 0; c < g.c; ++c)
    for (std::int64_t y = 0; y < g.h; ++y)
      for (std::int64_t x = 0; x < g.w; ++x) {
        float& out = dx[(c * g.h + y) * g.w + x];
        float v = accumulate ? out : 0.0f;
        for (std::int64_t i = 0; i < g.r; ++i) {
          const std::int64_t ty = y + g.pad - i;
          if (ty < 0 || ty % g.stride != 0 || ty / g.stride >= g.oh) continue;
          for (std::int64_t j = 0; j < g.s; ++j) {
            const std::int64_t tx = x + g.pad - j;
            if (tx < 0 || tx % g.stride != 0 || tx / g.stride >= g.ow) continue;
            v += tap(c, i, j)[ty / g.stride * g.ow + tx / g.stride];
          }
        }
        out = v;
      }
}

// Images per GEMM: enough that each product is a good size, few enough that
// a chunk's column matrix stays in the core's cache (kChunkFloats).
constexpr std::int64_t kChunkFloats = 1 << 18;

// Scratch matrices reused across calls on this thread (no allocation or page
// faults per step); grown on demand.
float* workspace(int which, std::int64_t floats) {
  thread_local std::vector<float> buffers[4];
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

// Runs body(chunk) for every chunk on the OpenMP threads, each product
// single-threaded inside (independent mid-sized products parallelise better
// than each product alone). Chunks are handed out dynamically (a thread the
// host stalls takes fewer); results depend on the chunk, not the thread.
template <class Body>
void forChunks(const Chunks& chunks, Body body) {
  const int outer = Eigen::nbThreads();
  Eigen::setNbThreads(1);
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t c = 0; c < chunks.count; ++c) body(c, omp_get_thread_num());
  Eigen::setNbThreads(outer);
}

// Pads the chunk's nc images of x (with x's image stride) into the
// workspace, one after another; returns them.
const float* padChunk(const Geom& g, const float* x, std::int64_t nc) {
  float* xp = workspace(2, nc * paddedFloats(g));
  for (std::int64_t i = 0; i < nc; ++i) padImage(g, x + i * g.c * g.h * g.w, xp + i * paddedFloats(g));
  return xp;
}

// The three products of a chunk of nc images, on
//   col [crs, ld]: the column matrix of the padded images xp (im2col), and
//   dY  [k, ld]:   the chunk's output gradient, [image, k, p] in memory,
// with ld = nc * p. With AVX-512 neither matrix is materialised.
#if defined(__AVX512F__)
// out[k, ld] = W col.
void forwardProduct(const Geom& g, const float* xp, std::int64_t nc, std::int64_t k, const float* w, float* out) {
  packed::gemm(false, false, k, nc * g.p(), g.crs(), packed::DenseSource{w, g.crs()}, ImageColumns(g, xp), false, out,
               nc * g.p());
}
// dw[k, crs] = dY col^T.
void weightProduct(const Geom& g, const float* xp, const float* dy, std::int64_t nc, std::int64_t k, float* dw) {
  packed::gemm(false, true, k, g.crs(), nc * g.p(), ChannelRows(dy, k, g.p()), ImageColumns(g, xp), false, dw,
               g.crs());
}
// col[crs, ld] = W^T dY.
void inputProduct(const Geom& g, const float* w, const float* dy, std::int64_t nc, std::int64_t k, float* col) {
  packed::gemm(true, false, g.crs(), nc * g.p(), k, packed::DenseSource{w, g.crs()}, ChannelRows(dy, k, g.p()), false,
               col, nc * g.p());
}
#else
const float* columnMatrix(const Geom& g, const float* xp, std::int64_t nc) {
  const std::int64_t ld = nc * g.p();
  float* col = workspace(1, g.crs() * ld);
  for (std::int64_t i = 0; i < nc; ++i) im2col(g, xp + i * paddedFloats(g), col + i * g.p(), ld);
  return col;
}
const float* gradientMatrix(const float* dy, std::int64_t nc, std::int64_t k, std::int64_t p) {
  float* dyk = workspace(0, k * nc * p);
  for (std::int64_t i = 0; i < nc; ++i)
    for (std::int64_t kk = 0; kk < k; ++kk)
      std::copy(dy + (i * k + kk) * p, dy + (i * k + kk + 1) * p, dyk + kk * nc * p + i * p);
  return dyk;
}
void forwardProduct(const Geom& g, const float* xp, std::int64_t nc, std::int64_t k, const float* w, float* out) {
  const std::int64_t ld = nc * g.p();
  gemmSerial(false, false, k, ld, g.crs(), w, g.crs(), columnMatrix(g, xp, nc), ld, false, out, ld);
}
void weightProduct(const Geom& g, const float* xp, const float* dy, std::int64_t nc, std::int64_t k, float* dw) {
  const std::int64_t ld = nc * g.p();
  gemmSerial(false, true, k, g.crs(), ld, gradientMatrix(dy, nc, k, g.p()), ld, columnMatrix(g, xp, nc), ld, false,
             dw, g.crs());
}
void inputProduct(const Geom& g, const float* w, const float* dy, std::int64_t nc, std::int64_t k, float* col) {
  const std::int64_t ld = nc * g.p();
  gemmSerial(true, false, g.crs(), ld, k, w, g.crs(), gradientMatrix(dy, nc, k, g.p()), ld, false, col, ld);
}
#endif

}  // namespace

void conv2dForward(const Conv2dShape& shape, const float* x, const float* w, const float* b, float* y) {
  const Geom g = geomOf(shape);
  const std::int64_t in_stride = g.c * g.h * g.w, p = g.p(), k = shape.k;
  const Chunks chunks = chunksOf(g, shape.n);
  forChunks(chunks, [&](std::int64_t c, int) {
    const std::int64_t n0 = c * chunks.size, nc = std::min(chunks.size, shape.n - n0), ld = nc * p;
    float* out = workspace(0, k * ld);
    forwardProduct(g, padChunk(g, x + n0 * in_stride, nc), nc, k, w, out);
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
  const std::int64_t in_stride = g.c * g.h * g.w, p = g.p(), k = shape.k, crs = g.crs();
  const Chunks chunks = chunksOf(g, shape.n);
  // Weight and bias gradients: one partial sum per chunk, added in chunk
  // order, so the result does not depend on the thread count.
  const std::int64_t dw_size = k * crs;
  // In the calling thread's workspace, shared with the chunks' threads.
  float* partial_dw = dw != nullptr ? workspace(3, chunks.count * dw_size) : nullptr;
  std::vector<double> partial_db(static_cast<std::size_t>(db != nullptr ? chunks.count * k : 0));
  forChunks(chunks, [&](std::int64_t c, int) {
    const std::int64_t n0 = c * chunks.size, nc = std::min(chunks.size, shape.n - n0), ld = nc * p;
    const float* dy_chunk = dy + n0 * k * p;
    if (db != nullptr)
      for (std::int64_t i = 0; i < nc; ++i)
        for (std::int64_t kk = 0; kk < k; ++kk)
          partial_db[static_cast<std::size_t>(c * k + kk)] +=
              Eigen::Map<const Eigen::VectorXf>(dy_chunk + (i * k + kk) * p, p).sum();
    if (dw != nullptr)
      weightProduct(g, padChunk(g, x + n0 * in_stride, nc), dy_chunk, nc, k, partial_dw + c * dw_size);
    if (dx != nullptr) {
      float* col = workspace(1, crs * ld);
      inputProduct(g, w, dy_chunk, nc, k, col);
      for (std::int64_t i = 0; i < nc; ++i) col2im(g, col + i * p, ld, dx + (n0 + i) * in_stride, accumulate_dx);
    }
  });
  if (dw != nullptr) {
    constexpr std::int64_t kBlock = 1024;
#pragma omp parallel for schedule(static)
    for (std::int64_t e0 = 0; e0 < dw_size; e0 += kBlock) {
      const std::int64_t len = std::min(kBlock, dw_size - e0);
      float* __restrict out = dw + e0;
      if (!accumulate_dw) std::fill(out, out + len, 0.0f);
      for (std::int64_t c = 0; c < chunks.count; ++c) {
        const float* __restrict part = partial_dw + c * dw_size + e0;
        for (std::int64_t e = 0; e < len; ++e) out[e] += part[e];
      }
    }
  }
  if (db != nullptr)
    for (std::int64_t kk = 0; kk < k; ++kk) {
      double s = 0;
      for (std::int64_t c = 0; c < chunks.count; ++c) s += partial_db[static_cast<std::size_t>(c * k + kk)];
      db[kk] = (accumulate_db ? db[kk] : 0.0f) + static_cast<float>(s);
    }
}

}  // namespace hpu::device::kernels
