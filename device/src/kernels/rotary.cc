#include "hpu/device/kernels/rotary.h"

#include <cmath>
#include <vector>

#include "hpu/device/threading.h"

namespace hpu::device::kernels {
namespace {

// cos and sin of a_i for every (row, i): [len, D/2] each, in float32 as
// Hugging Face's LlamaRotaryEmbedding: angles = position * inv_freq.
struct Angles {
  std::vector<float> cos, sin;
};
Angles anglesOf(std::int64_t len, std::int64_t d, const std::int64_t* positions, const float* inv_freq) {
  const std::int64_t half = d / 2;
  Angles a{std::vector<float>(static_cast<std::size_t>(len * half)),
           std::vector<float>(static_cast<std::size_t>(len * half))};
  for (std::int64_t t = 0; t < len; ++t)
    for (std::int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(positions[t]) * inv_freq[i];
      a.cos[static_cast<std::size_t>(t * half + i)] = std::cos(angle);
      a.sin[static_cast<std::size_t>(t * half + i)] = std::sin(angle);
    }
  return a;
}

// y = rotation of x by `sign` * a.
void rotate(const float* x, std::int64_t groups, std::int64_t len, std::int64_t d, const Angles& a, float sign,
            float* y, bool accumulate) {
  const std::int64_t half = d / 2;
  static ParallelSite site("rotary");
  parallelFor(site, groups * len, 1, static_cast<double>(groups * len * d), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      const float* c = a.cos.data() + (row % len) * half;
      const float* s = a.sin.data() + (row % len) * half;
      const float* xr = x + row * d;
      float* yr = y + row * d;
      for (std::int64_t i = 0; i < half; ++i) {
        const float lo = xr[i], hi = xr[i + half], sn = sign * s[i];
        const float ylo = lo * c[i] - hi * sn, yhi = hi * c[i] + lo * sn;
        yr[i] = accumulate ? yr[i] + ylo : ylo;
        yr[i + half] = accumulate ? yr[i + half] + yhi : yhi;
      }
    }
  });
}

}  // namespace

void rotaryForward(const float* x, std::int64_t groups, std::int64_t len, std::int64_t d, const std::int64_t* positions,
                   const float* inv_freq, float* y) {
  rotate(x, groups, len, d, anglesOf(len, d, positions, inv_freq), 1.0f, y, false);
}

void rotaryBackward(const float* dy, std::int64_t groups, std::int64_t len, std::int64_t d,
                    const std::int64_t* positions, const float* inv_freq, float* dx, bool accumulate) {
  rotate(dy, groups, len, d, anglesOf(len, d, positions, inv_freq), -1.0f, dx, accumulate);
}

}  // namespace hpu::device::kernels
