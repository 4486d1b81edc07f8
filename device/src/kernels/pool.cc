#include "hpu/device/kernels/pool.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace hpu::device::kernels {

void maxPool2dForward(const Pool2dShape& g, const float* x, float* y, std::int32_t* argmax) {
  const std::int64_t oh = g.outH(), ow = g.outW();
#pragma omp parallel for if (g.planes > 8)
  for (std::int64_t p = 0; p < g.planes; ++p)
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
            if (v > best || at < 0 || std::isnan(v)) {
              best = v;
              at = static_cast<std::int32_t>(iy * g.w + ix);
            }
          }
        }
        const std::int64_t o = (p * oh + oy) * ow + ox;
        y[o] = best;
        argmax[o] = at;
      }
}

void maxPool2dBackward(const Pool2dShape& g, const float* dy, const std::int32_t* argmax, float* dx, bool accumulate) {
  const std::int64_t out = g.outH() * g.outW(), in = g.h * g.w;
  if (!accumulate) std::fill(dx, dx + g.planes * in, 0.0f);
#pragma omp parallel for if (g.planes > 8)
  for (std::int64_t p = 0; p < g.planes; ++p)
    for (std::int64_t i = 0; i < out; ++i) dx[p * in + argmax[p * out + i]] += dy[p * out + i];
}

void avgPool2dForward(const Pool2dShape& g, const float* x, float* y) {
  const std::int64_t oh = g.outH(), ow = g.outW();
  const float inv = 1.0f / static_cast<float>(g.kernel * g.kernel);
#pragma omp parallel for if (g.planes > 8)
  for (std::int64_t p = 0; p < g.planes; ++p)
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
}

void avgPool2dBackward(const Pool2dShape& g, const float* dy, float* dx, bool accumulate) {
  const std::int64_t oh = g.outH(), ow = g.outW();
  const float inv = 1.0f / static_cast<float>(g.kernel * g.kernel);
  if (!accumulate) std::fill(dx, dx + g.planes * g.h * g.w, 0.0f);
#pragma omp parallel for if (g.planes > 8)
  for (std::int64_t p = 0; p < g.planes; ++p)
    for (std::int64_t oy = 0; oy < oh; ++oy)
      for (std::int64_t ox = 0; ox < ow; ++ox) {
        const float d = dy[(p * oh + oy) * ow + ox] * inv;
        for (std::int64_t i = 0; i < g.kernel; ++i)
          for (std::int64_t j = 0; j < g.kernel; ++j) {
            const std::int64_t iy = oy * g.stride + i - g.pad, ix = ox * g.stride + j - g.pad;
            if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) dx[(p * g.h + iy) * g.w + ix] += d;
          }
      }
}

}  // namespace hpu::device::kernels
