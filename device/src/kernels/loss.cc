#include "hpu/device/kernels/loss.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "exp_loops.h"
#include "fast_exp.h"
#include "hpu/device/threading.h"

namespace hpu::device::kernels {

using detail::sumExp;

double crossEntropyForward(const float* logits, const std::int64_t* labels, std::int64_t n, std::int64_t c,
                           float smoothing, std::int64_t ignore_index, float* lse, std::int64_t* counted,
                           std::int64_t stride) {
  if (stride == 0) stride = c;
  std::vector<double> row_loss(static_cast<std::size_t>(n));
  static ParallelSite site("cross entropy forward");
  parallelFor(site, n, 1, static_cast<double>(n * c), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* row = logits + r * stride;
      const float mx = *std::max_element(row, row + c);
      const double log_sum = static_cast<double>(mx) + std::log(sumExp(row, c, mx));
      lse[r] = static_cast<float>(log_sum);
      if (labels[r] == ignore_index) continue;
      double mean = 0;
      if (smoothing != 0.0f) {
        for (std::int64_t j = 0; j < c; ++j) mean += row[j];
        mean /= static_cast<double>(c);
      }
      row_loss[static_cast<std::size_t>(r)] =
          (1.0 - smoothing) * (log_sum - row[labels[r]]) + smoothing * (log_sum - mean);
    }
  });
  double total = 0;
  std::int64_t rows = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    if (labels[r] == ignore_index) continue;
    total += row_loss[static_cast<std::size_t>(r)];
    ++rows;
  }
  *counted = rows;
  return total;
}

void crossEntropyBackward(const float* logits, const std::int64_t* labels, const float* lse, std::int64_t n,
                          std::int64_t c, float smoothing, std::int64_t ignore_index, float scale, float* dlogits,
                          bool accumulate, std::int64_t stride) {
  if (stride == 0) stride = c;
  const float off = smoothing / static_cast<float>(c);
  static ParallelSite site("cross entropy backward");
  parallelFor(site, n, 1, static_cast<double>(n * c), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* row = logits + r * stride;
      float* __restrict d = dlogits + r * stride;
      if (!accumulate) std::fill(d + c, d + stride, 0.0f);
      if (labels[r] == ignore_index) {
        if (!accumulate) std::fill(d, d + c, 0.0f);
        continue;
      }
      const float shift = lse[r];
      for (std::int64_t j = 0; j < c; ++j) {
        const float g = (detail::fastExp(row[j] - shift) - off) * scale;
        d[j] = accumulate ? d[j] + g : g;
      }
      d[labels[r]] -= (1.0f - smoothing) * scale;
    }
  });
}

void softmaxForward(const float* x, std::int64_t rows, std::int64_t c, float* y) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * c;
    float* out = y + r * c;
    const float mx = *std::max_element(row, row + c);
    double s = 0;
    for (std::int64_t j = 0; j < c; ++j) s += (out[j] = std::exp(row[j] - mx));
    for (std::int64_t j = 0; j < c; ++j) out[j] = static_cast<float>(out[j] / s);
  }
}

void softmaxBackward(const float* y, const float* dy, std::int64_t rows, std::int64_t c, float* dx, bool accumulate) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* p = y + r * c;
    const float* g = dy + r * c;
    double dot = 0;
    for (std::int64_t j = 0; j < c; ++j) dot += static_cast<double>(p[j]) * g[j];
    for (std::int64_t j = 0; j < c; ++j) {
      const float d = p[j] * (g[j] - static_cast<float>(dot));
      dx[r * c + j] = accumulate ? dx[r * c + j] + d : d;
    }
  }
}

double mseForward(const float* a, const float* b, std::int64_t n) {
  double total = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double d = a[i] - b[i];
    total += d * d;
  }
  return total / static_cast<double>(n);
}

std::int64_t countArgmaxMatches(const float* logits, const std::int64_t* labels, std::int64_t n, std::int64_t c) {
  std::int64_t correct = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    const float* row = logits + r * c;
    correct += (std::max_element(row, row + c) - row) == labels[r];
  }
  return correct;
}

}  // namespace hpu::device::kernels
