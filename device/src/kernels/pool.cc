#include "hpu/device/kernels/pool.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "hpu/device/threading.h"
#include "isa/kernels.h"

namespace hpu::device::kernels {

void maxPool2x2Planes(const Pool2dShape& g, std::int64_t p0, std::int64_t p1, const float* x, float* y,
                      std::int32_t* argmax) {
  // The instruction set's kernel (isa/kernels.h), else this loop.
  if (const auto kernel = isaKernels(cpuIsa()).maxPool2x2; kernel != nullptr) return kernel(g, p0, p1, x, y, argmax);
  const std::int64_t oh = g.outH(), ow = g.outW();
  for (std::int64_t p = p0; p < p1; ++p)
    for (std::int64_t oy = 0; oy < oh; ++oy) {
      const float* r0 = x + (p * g.h + 2 * oy) * g.w;
      const float* r1 = r0 + g.w;
      float* out = y + (p * oh + oy) * ow;
      std::int32_t* arg = argmax + (p * oh + oy) * ow;
      const auto base = static_cast<std::int32_t>(2 * oy * g.w);
      for (std::int64_t ox = 0; ox < ow; ++ox) {
        const float a = r0[2 * ox], b = r0[2 * ox + 1], c = r1[2 * ox], d = r1[2 * ox + 1];
        // First maximum in window order, NaN winning, as the general path.
        std::int32_t at = 0;
        float best = a;
        if (!std::isnan(best) && (b > best || std::isnan(b))) best = b, at = 1;
        if (!std::isnan(best) && (c > best || std::isnan(c))) best = c, at = 2;
        if (!std::isnan(best) && (d > best || std::isnan(d))) best = d, at = 3;
        out[ox] = best;
        arg[ox] = base + static_cast<std::int32_t>(2 * ox) + (at & 1) + (at >> 1) * static_cast<std::int32_t>(g.w);
      }
    }
}

void maxPool2dBackwardPlanes(const Pool2dShape& g, std::int64_t p0, std::int64_t p1, const float* dy,
                             const std::int32_t* argmax, float* dx, bool accumulate) {
  const std::int64_t out = g.outH() * g.outW(), in = g.h * g.w;
  if (!accumulate) std::fill(dx + p0 * in, dx + p1 * in, 0.0f);
  for (std::int64_t p = p0; p < p1; ++p)
    for (std::int64_t i = 0; i < out; ++i) dx[p * in + argmax[p * out + i]] += dy[p * out + i];
}

void maxPool2dForward(const Pool2dShape& g, const float* x, float* y, std::int32_t* argmax) {
  if (g.kernel == 2 && g.stride == 2 && g.pad == 0) {  // the common case, without bounds checks
    static ParallelSite site("max pool 2x2");
    return parallelFor(site, g.planes, 1, static_cast<double>(g.planes * g.h * g.w),
                       [&](std::int64_t begin, std::int64_t end) { maxPool2x2Planes(g, begin, end, x, y, argmax); });
  }
  const std::int64_t oh = g.outH(), ow = g.outW();
  static ParallelSite site("max pool");
  parallelFor(site, g.planes, 1, static_cast<double>(g.planes * oh * ow * g.kernel * g.kernel),
              [&](std::int64_t begin, std::int64_t end) {
                for (std::int64_t p = begin; p < end; ++p)
                  for (std::int64_t oy = 0; oy < oh; ++oy)
                    for (std::int64_t ox = 0; ox < ow; ++ox) {
                      float best = -std::numeric_limits<float>::infinity();
                      std::int32_t at = -1;
                      for (std::int64_t i = 0; i < g.kernel; ++i) {
                        const std::int64_t iy = oy * g.stride + i - g.pad;
                        if (iy < 0 || iy >= g.h) continue;
                        for (std::int64_t j = 0; j < g.kernel; ++j) {
                          const std::int64_t ix = ox * g.stride + j - g.pad;
                          if (ix < 0 || ix >= g.w) continue;
                          const float v = x[(p * g.h + iy) * g.w + ix];
                          if (at < 0 || (!std::isnan(best) && (v > best || std::isnan(v)))) {
                            best = v;
                            at = static_cast<std::int32_t>(iy * g.w + ix);
                          }
                        }
                      }
                      const std::int64_t o = (p * oh + oy) * ow + ox;
                      y[o] = best;
                      argmax[o] = at;
                    }
              });
}

void maxPool2dBackward(const Pool2dShape& g, const float* dy, const std::int32_t* argmax, float* dx, bool accumulate) {
  static ParallelSite site("max pool backward");
  // Zeroed range by range, so each range is still in cache for its adds.
  parallelFor(site, g.planes, 1, static_cast<double>(g.planes * g.h * g.w), [&](std::int64_t begin, std::int64_t end) {
    maxPool2dBackwardPlanes(g, begin, end, dy, argmax, dx, accumulate);
  });
}

void avgPool2dForward(const Pool2dShape& g, const float* x, float* y) {
  const std::int64_t oh = g.outH(), ow = g.outW();
  const float inv = 1.0f / static_cast<float>(g.kernel * g.kernel);
  static ParallelSite site("avg pool");
  parallelFor(site, g.planes, 1, static_cast<double>(g.planes * oh * ow * g.kernel * g.kernel),
              [&](std::int64_t begin, std::int64_t end) {
                for (std::int64_t p = begin; p < end; ++p)
                  for (std::int64_t oy = 0; oy < oh; ++oy)
                    for (std::int64_t ox = 0; ox < ow; ++ox) {
                      float s = 0;
                      for (std::int64_t i = 0; i < g.kernel; ++i)
                        for (std::int64_t j = 0; j < g.kernel; ++j) {
                          const std::int64_t iy = oy * g.stride + i - g.pad, ix = ox * g.stride + j - g.pad;
                          if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) s += x[(p * g.h + iy) * g.w + ix];
                        }
                      y[(p * oh + oy) * ow + ox] = s * inv;
                    }
              });
}

void avgPool2dBackward(const Pool2dShape& g, const float* dy, float* dx, bool accumulate) {
  const std::int64_t oh = g.outH(), ow = g.outW();
  const float inv = 1.0f / static_cast<float>(g.kernel * g.kernel);
  if (!accumulate) std::fill(dx, dx + g.planes * g.h * g.w, 0.0f);
  static ParallelSite site("avg pool backward");
  parallelFor(site, g.planes, 1, static_cast<double>(g.planes * oh * ow * g.kernel * g.kernel),
              [&](std::int64_t begin, std::int64_t end) {
                for (std::int64_t p = begin; p < end; ++p)
                  for (std::int64_t oy = 0; oy < oh; ++oy)
                    for (std::int64_t ox = 0; ox < ow; ++ox) {
                      const float d = dy[(p * oh + oy) * ow + ox] * inv;
                      for (std::int64_t i = 0; i < g.kernel; ++i)
                        for (std::int64_t j = 0; j < g.kernel; ++j) {
                          const std::int64_t iy = oy * g.stride + i - g.pad, ix = ox * g.stride + j - g.pad;
                          if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) dx[(p * g.h + iy) * g.w + ix] += d;
                        }
                    }
              });
}

}  // namespace hpu::device::kernels
