#include "hpu/device/kernels/rotary.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "hpu/device/threading.h"
#include "hpu/device/vector_clones.h"

namespace hpu::device::kernels {
namespace {

// cos and sin of a_i for every (row, i): [len, D/2] each, in float32 as
// Hugging Face's LlamaRotaryEmbedding: angles = position * inv_freq.
struct Angles {
  std::vector<std::int64_t> positions;
  std::vector<float> inv_freq;
  std::vector<float> cos, sin;
};

// The table of these positions and frequencies. The calling thread keeps the
// last one: every layer of a step, forward and backward, and every step of a
// fit rotate by the same angles (rebuilt per call, its 8,192 std::cos and
// std::sin ran serially while the team waited).
const Angles& anglesOf(std::int64_t len, std::int64_t d, const std::int64_t* positions, const float* inv_freq) {
  const std::int64_t half = d / 2;
  thread_local Angles a;
  if (std::equal(positions, positions + len, a.positions.begin(), a.positions.end()) &&
      std::equal(inv_freq, inv_freq + half, a.inv_freq.begin(), a.inv_freq.end()))
    return a;
  a.positions.assign(positions, positions + len);
  a.inv_freq.assign(inv_freq, inv_freq + half);
  a.cos.resize(static_cast<std::size_t>(len * half));
  a.sin.resize(a.cos.size());
  for (std::int64_t t = 0; t < len; ++t)
    for (std::int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(positions[t]) * inv_freq[i];
      a.cos[static_cast<std::size_t>(t * half + i)] = std::cos(angle);
      a.sin[static_cast<std::size_t>(t * half + i)] = std::sin(angle);
    }
  return a;
}

// yr (+)= rotation of one row xr by `sign` * a (cos c, sin s): its halves
// lo and hi, vectorised over i. yr may be xr: element i and i + half are
// read and written by step i alone.
template <bool kAccumulate>
__attribute__((always_inline)) inline void rotateRow(const float* xr, const float* c, const float* s, float sign,
                                                     std::int64_t half, float* yr) {
  for (std::int64_t i = 0; i < half; ++i) {
    const float lo = xr[i], hi = xr[i + half], sn = sign * s[i];
    const float ylo = lo * c[i] - hi * sn, yhi = hi * c[i] + lo * sn;
    yr[i] = kAccumulate ? yr[i] + ylo : ylo;
    yr[i + half] = kAccumulate ? yr[i + half] + yhi : yhi;
  }
}

// Where the rows of a [groups * len, d] rotation are: row (group, t) at
// group * len + t, or, on a token-major side of `heads` heads, the [B, len,
// heads, d] layout's row (b, t, h) for group b * heads + h.
struct RowLayout {
  std::int64_t len, heads;
  bool x_token_major, y_token_major;
  std::int64_t tokenMajor(std::int64_t row) const {
    const std::int64_t group = row / len, t = row % len;
    return (group / heads * len + t) * heads + group % heads;
  }
  std::int64_t xRow(std::int64_t row) const { return x_token_major ? tokenMajor(row) : row; }
  std::int64_t yRow(std::int64_t row) const { return y_token_major ? tokenMajor(row) : row; }
};

// rotateRow on rows [begin, end) of x and y.
template <bool kAccumulate>
void rotateRows(const float* x, std::int64_t begin, std::int64_t end, const RowLayout& layout, std::int64_t d,
                const Angles& a, float sign, float* y) {
  const std::int64_t half = d / 2, len = layout.len;
  const float* cos = a.cos.data();
  const float* sin = a.sin.data();
  onVectorLevel([=]() HPU_LOOP_BODY {  // by value: the loop reads no reference a store could alias
    for (std::int64_t row = begin; row < end; ++row)
      rotateRow<kAccumulate>(x + layout.xRow(row) * d, cos + (row % len) * half, sin + (row % len) * half, sign, half,
                             y + layout.yRow(row) * d);
  });
}

void rotate(const float* x, std::int64_t groups, const RowLayout& layout, std::int64_t d, const Angles& a,
            float sign, float* y, bool accumulate) {
  static ParallelSite site("rotary");
  const std::int64_t rows = groups * layout.len;
  parallelFor(site, rows, 1, static_cast<double>(rows * d), [&](std::int64_t begin, std::int64_t end) {
    if (accumulate)
      rotateRows<true>(x, begin, end, layout, d, a, sign, y);
    else
      rotateRows<false>(x, begin, end, layout, d, a, sign, y);
  });
}

}  // namespace

void rotaryForward(const float* x, std::int64_t groups, std::int64_t len, std::int64_t d, const std::int64_t* positions,
                   const float* inv_freq, float* y, std::int64_t token_major_heads) {
  const RowLayout layout{len, token_major_heads, token_major_heads > 0, false};
  rotate(x, groups, layout, d, anglesOf(len, d, positions, inv_freq), 1.0f, y, false);
}

void rotaryBackward(const float* dy, std::int64_t groups, std::int64_t len, std::int64_t d,
                    const std::int64_t* positions, const float* inv_freq, float* dx, bool accumulate,
                    std::int64_t token_major_heads) {
  const RowLayout layout{len, token_major_heads, false, token_major_heads > 0};
  rotate(dy, groups, layout, d, anglesOf(len, d, positions, inv_freq), -1.0f, dx, accumulate);
}

}  // namespace hpu::device::kernels
