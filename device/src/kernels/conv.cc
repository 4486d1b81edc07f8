#include "hpu/device/kernels/conv.h"

#include <Eigen/Core>
#include <algorithm>
#include <vector>

#include "conv_geometry.h"
#include "hpu/device/kernels/pool.h"
#include "hpu/device/threading.h"
#include "isa/kernels.h"

namespace hpu::device::kernels {
namespace {

using Geom = ConvGeometry;

void padImage(const Geom& g, const float* x, float* xp) {
  const std::int64_t hp = g.paddedH(), wp = g.paddedW();
  std::fill(xp, xp + g.paddedFloats(), 0.0f);
  for (std::int64_t c = 0; c < g.c; ++c)
    for (std::int64_t y = 0; y < g.h; ++y) {
      const float* src = x + (c * g.h + y) * g.w;
      std::copy(src, src + g.w, xp + (c * hp + y + g.pad) * wp + g.pad);
    }
}

// The adjoint of im2col: dx[c][y][x] (+)= the sum, over the kernel taps
// (i, j) in order, of col[(c*r+i)*s+j][oy*ow+ox] where oy*stride + i - pad = y
// and ox*stride + j - pad = x. Each element of dx is written once.
void col2im(const Geom& g, const float* col, std::int64_t ld, float* dx, bool accumulate) {
  auto tap = [&](std::int64_t c, std::int64_t i, std::int64_t j) { return col + ((c * g.r + i) * g.s + j) * ld; };
  if (g.stride == 1) {  // each tap adds a stretch of an output row to a stretch of dx's row
    for (std::int64_t c = 0; c < g.c; ++c)
      for (std::int64_t y = 0; y < g.h; ++y) {
        float* __restrict out = dx + (c * g.h + y) * g.w;
        if (!accumulate) std::fill(out, out + g.w, 0.0f);
        for (std::int64_t i = 0; i < g.r; ++i) {
          const std::int64_t oy = y + g.pad - i;
          if (oy < 0 || oy >= g.oh) continue;
          for (std::int64_t j = 0; j < g.s; ++j) {
            // x reads output column ox = x + pad - j, within [0, ow).
            const std::int64_t x0 = std::max<std::int64_t>(0, j - g.pad), x1 = std::min(g.w, g.ow + j - g.pad);
            const float* __restrict src = tap(c, i, j) + oy * g.ow + g.pad - j;
            for (std::int64_t x = x0; x < x1; ++x) out[x] += src[x];
          }
        }
      }
    return;
  }
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
// a chunk's column matrix stays in the core's cache (kChunkFloats), and at
// most a kMinChunks-th of the batch, so that the threads can share a batch
// of small images evenly. (Neither depends on the thread count: the chunks
// fix the summation order of the weight gradient.)
constexpr std::int64_t kChunkFloats = 1 << 18, kMinChunks = 8;

// Scratch matrices reused across calls on this thread (no allocation or page
// faults per step); grown on demand.
float* workspace(int which, std::int64_t floats) {
  thread_local std::vector<float> buffers[5];
  auto& b = buffers[which];
  if (static_cast<std::int64_t>(b.size()) < floats) b.resize(static_cast<std::size_t>(floats));
  return b.data();
}

struct Chunks {
  std::int64_t size, count;
};
Chunks chunksOf(const Geom& g, std::int64_t n) {
  const std::int64_t size = std::clamp<std::int64_t>(kChunkFloats / std::max<std::int64_t>(1, g.crs() * g.p()), 1,
                                                     std::max<std::int64_t>(1, (n + kMinChunks - 1) / kMinChunks));
  return {size, (n + size - 1) / size};
}

// Runs body(chunk) for every chunk on the intra-op threads, each product
// single-threaded inside (independent mid-sized products parallelise better
// than each product alone). Chunks are handed out one at a time (a thread
// the host stalls takes fewer); results depend on the chunk, not the thread.
// `flops`: the products' work, for the parallel cost model.
template <class Body>
void forChunks(ParallelSite& site, const Chunks& chunks, double flops, Body body) {
  parallelTasks(site, chunks.count, flops, body);
}

// Pads the chunk's nc images of x (with x's image stride) into the
// workspace, one after another; returns them.
const float* padChunk(const Geom& g, const float* x, std::int64_t nc) {
  float* xp = workspace(2, nc * g.paddedFloats());
  for (std::int64_t i = 0; i < nc; ++i) padImage(g, x + i * g.c * g.h * g.w, xp + i * g.paddedFloats());
  return xp;
}

// A chunk's product out [k, nc * p] (the images side by side) into the
// images' [image, k, p] layout at y, plus bias[k] (may be null); added to
// y's values when accumulate.
void storeImages(const float* out, std::int64_t nc, std::int64_t k, std::int64_t p, const float* bias, float* y,
                 bool accumulate) {
  for (std::int64_t i = 0; i < nc; ++i)
    for (std::int64_t kk = 0; kk < k; ++kk) {
      const float* __restrict src = out + kk * nc * p + i * p;
      float* __restrict dst = y + (i * k + kk) * p;
      const float add = bias != nullptr ? bias[kk] : 0.0f;
      if (accumulate)
        for (std::int64_t q = 0; q < p; ++q) dst[q] += src[q] + add;
      else
        for (std::int64_t q = 0; q < p; ++q) dst[q] = src[q] + add;
    }
}

// The input gradient of a stride-1 convolution with a square kernel and
// pad < r is itself a convolution: of dy, padded by r - 1 - pad, with the
// weights flipped in both spatial axes and their channel axes swapped
// (the "full" convolution). That form multiplies straight from the images,
// where W^T dY would build the column matrix and fold it back (col2im).
bool inputGradientIsAConvolution(const Conv2dShape& g) {
  return g.stride == 1 && g.r == g.s && g.pad < g.r;
}

// That convolution's shape for images of dy [n, k, outH, outW], and its
// weights [c, k, r, s]: w_t[c][k][i][j] = w[k][c][r-1-i][s-1-j].
Conv2dShape inputGradientShape(const Conv2dShape& g) {
  return {g.n, g.k, g.outH(), g.outW(), g.c, g.r, g.s, 1, g.r - 1 - g.pad};
}
std::vector<float> inputGradientWeights(const Conv2dShape& g, const float* w) {
  std::vector<float> w_t(static_cast<std::size_t>(g.c * g.k * g.r * g.s));
  for (std::int64_t k = 0; k < g.k; ++k)
    for (std::int64_t c = 0; c < g.c; ++c)
      for (std::int64_t i = 0; i < g.r; ++i)
        for (std::int64_t j = 0; j < g.s; ++j)
          w_t[static_cast<std::size_t>(((c * g.k + k) * g.r + i) * g.s + j)] =
              w[((k * g.c + c) * g.r + (g.r - 1 - i)) * g.s + (g.s - 1 - j)];
  return w_t;
}

// conv2dForward's chunks: epilogue(n0, nc, out) gets each chunk's product
// out [k, nc * p] (images n0 .. n0 + nc - 1 side by side), on its thread.
template <class Epilogue>
void forwardChunks(const Conv2dShape& shape, const float* x, const float* w, Epilogue epilogue) {
  const Geom g = Geom::of(shape);
  const std::int64_t in_stride = g.c * g.h * g.w, p = g.p(), k = shape.k;
  const Chunks chunks = chunksOf(g, shape.n);
  const IsaKernels& kernels = isaKernels(cpuIsa());
  static ParallelSite site("conv forward");
  forChunks(site, chunks, 2.0 * static_cast<double>(shape.n * k * p * g.crs()), [&](std::int64_t c) {
    const std::int64_t n0 = c * chunks.size, nc = std::min(chunks.size, shape.n - n0);
    float* out = workspace(0, k * nc * p);
    kernels.convForward(g, padChunk(g, x + n0 * in_stride, nc), nc, k, w, out);
    epilogue(n0, nc, out);
  });
}

// The 2x2, stride-2 pooling of one [outH, outW] output plane.
Pool2dShape planePool(const Conv2dShape& g) { return {1, g.outH(), g.outW(), 2, 2, 0}; }

// conv2dBackward, with dyChunk(n0, nc) giving the output gradient of images
// n0 .. n0 + nc - 1 ([nc, k, outH, outW]) on the chunk's thread.
template <class DyChunk>
void backwardChunks(const Conv2dShape& shape, const float* x, const float* w, DyChunk dyChunk, float* dx,
                    bool accumulate_dx, float* dw, bool accumulate_dw, float* db, bool accumulate_db) {
  const Geom g = Geom::of(shape);
  const std::int64_t in_stride = g.c * g.h * g.w, p = g.p(), k = shape.k, crs = g.crs();
  const IsaKernels& kernels = isaKernels(cpuIsa());
  const Chunks chunks = chunksOf(g, shape.n);
  // Weight and bias gradients: one partial sum per chunk, added in chunk
  // order, so the result does not depend on the thread count.
  const std::int64_t dw_size = k * crs;
  // In the calling thread's workspace, shared with the chunks' threads.
  float* partial_dw = dw != nullptr ? workspace(3, chunks.count * dw_size) : nullptr;
  std::vector<double> partial_db(static_cast<std::size_t>(db != nullptr ? chunks.count * k : 0));
  // The input gradient as a convolution where it is one.
  const bool dx_by_conv = dx != nullptr && inputGradientIsAConvolution(shape);
  const Geom t = Geom::of(inputGradientShape(shape));
  const std::vector<float> w_t = dx_by_conv ? inputGradientWeights(shape, w) : std::vector<float>{};
  static ParallelSite site("conv backward");
  const double products = (dw != nullptr) + (dx != nullptr);
  forChunks(site, chunks, 2.0 * products * static_cast<double>(shape.n * k * p * crs), [&](std::int64_t c) {
    const std::int64_t n0 = c * chunks.size, nc = std::min(chunks.size, shape.n - n0), ld = nc * p;
    const float* dy_chunk = dyChunk(n0, nc);
    if (db != nullptr)
      for (std::int64_t i = 0; i < nc; ++i)
        for (std::int64_t kk = 0; kk < k; ++kk)
          partial_db[static_cast<std::size_t>(c * k + kk)] +=
              Eigen::Map<const Eigen::VectorXf>(dy_chunk + (i * k + kk) * p, p).sum();
    if (dw != nullptr)
      kernels.convWeight(g, padChunk(g, x + n0 * in_stride, nc), dy_chunk, nc, k, partial_dw + c * dw_size);
    if (dx_by_conv) {
      float* out = workspace(1, g.c * nc * t.p());
      kernels.convForward(t, padChunk(t, dy_chunk, nc), nc, g.c, w_t.data(), out);
      storeImages(out, nc, g.c, t.p(), nullptr, dx + n0 * in_stride, accumulate_dx);
    } else if (dx != nullptr) {
      float* col = workspace(1, crs * ld);
      kernels.convInput(g, w, dy_chunk, nc, k, col);
      for (std::int64_t i = 0; i < nc; ++i) col2im(g, col + i * p, ld, dx + (n0 + i) * in_stride, accumulate_dx);
    }
  });
  if (dw != nullptr) {
    static ParallelSite sum_site("conv backward: sum dW");
    parallelFor(sum_site, dw_size, 1 << 10, static_cast<double>(chunks.count * dw_size),
                [&](std::int64_t begin, std::int64_t end) {
                  float* __restrict out = dw + begin;
                  if (!accumulate_dw) std::fill(out, out + (end - begin), 0.0f);
                  for (std::int64_t c = 0; c < chunks.count; ++c) {
                    const float* __restrict part = partial_dw + c * dw_size + begin;
                    for (std::int64_t e = 0; e < end - begin; ++e) out[e] += part[e];
                  }
                });
  }
  if (db != nullptr)
    for (std::int64_t kk = 0; kk < k; ++kk) {
      double s = 0;
      for (std::int64_t c = 0; c < chunks.count; ++c) s += partial_db[static_cast<std::size_t>(c * k + kk)];
      db[kk] = (accumulate_db ? db[kk] : 0.0f) + static_cast<float>(s);
    }
}

}  // namespace

void conv2dForward(const Conv2dShape& shape, const float* x, const float* w, const float* b, float* y) {
  const std::int64_t p = shape.outH() * shape.outW(), k = shape.k;
  forwardChunks(shape, x, w, [&](std::int64_t n0, std::int64_t nc, const float* out) {
    storeImages(out, nc, k, p, b, y + n0 * k * p, false);
  });
}

void conv2dMaxPoolForward(const Conv2dShape& shape, const float* x, const float* w, const float* b, float* y,
                          std::int32_t* argmax) {
  const std::int64_t p = shape.outH() * shape.outW(), k = shape.k;
  const Pool2dShape pool = planePool(shape);
  const std::int64_t q = pool.outH() * pool.outW();
  forwardChunks(shape, x, w, [&](std::int64_t n0, std::int64_t nc, float* out) {
    // Plane (kk, i) of the chunk sits at out + (kk * nc + i) * p.
    for (std::int64_t kk = 0; kk < k; ++kk) {
      float* __restrict planes = out + kk * nc * p;
      const float add = b != nullptr ? b[kk] : 0.0f;  // the same sums as storeImages (-0 + 0 is +0)
      for (std::int64_t e = 0; e < nc * p; ++e) planes[e] = planes[e] + add;
      for (std::int64_t i = 0; i < nc; ++i) {
        const std::int64_t o = ((n0 + i) * k + kk) * q;
        maxPool2x2Planes(pool, 0, 1, planes + i * p, y + o, argmax + o);
      }
    }
  });
}

void conv2dBackward(const Conv2dShape& shape, const float* x, const float* w, const float* dy, float* dx,
                    bool accumulate_dx, float* dw, bool accumulate_dw, float* db, bool accumulate_db) {
  const std::int64_t image = shape.k * shape.outH() * shape.outW();
  backwardChunks(
      shape, x, w, [&](std::int64_t n0, std::int64_t) { return dy + n0 * image; }, dx, accumulate_dx, dw,
      accumulate_dw, db, accumulate_db);
}

void conv2dMaxPoolBackward(const Conv2dShape& shape, const float* x, const float* w, const float* dy_pooled,
                           const std::int32_t* argmax, float* dx, bool accumulate_dx, float* dw, bool accumulate_dw,
                           float* db, bool accumulate_db) {
  const Pool2dShape pool = planePool(shape);
  const std::int64_t q = pool.outH() * pool.outW(), p = shape.outH() * shape.outW();
  backwardChunks(
      shape, x, w,
      [&](std::int64_t n0, std::int64_t nc) {
        float* dy = workspace(4, nc * shape.k * p);
        maxPool2dBackwardPlanes({nc * shape.k, pool.h, pool.w, 2, 2, 0}, 0, nc * shape.k, dy_pooled + n0 * shape.k * q,
                                argmax + n0 * shape.k * q, dy, false);
        return static_cast<const float*>(dy);
      },
      dx, accumulate_dx, dw, accumulate_dw, db, accumulate_db);
}

}  // namespace hpu::device::kernels
