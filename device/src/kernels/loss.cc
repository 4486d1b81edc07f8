#include "hpu/device/kernels/loss.h"

#include <algorithm>
#include <cmath>

namespace hpu::device::kernels {

double softmaxCrossEntropyForward(const float* logits, const std::int64_t* labels, std::int64_t n, std::int64_t c,
                                  float smoothing, float* probs) {
  double total = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    const float* row = logits + r * c;
    const float mx = *std::max_element(row, row + c);
    double sum = 0;
    for (std::int64_t j = 0; j < c; ++j) sum += std::exp(static_cast<double>(row[j] - mx));
    const double log_sum = std::log(sum);
    double smooth = 0;
    for (std::int64_t j = 0; j < c; ++j) {
      const double logp = row[j] - mx - log_sum;
      probs[r * c + j] = static_cast<float>(std::exp(logp));
      smooth -= logp;
    }
    const double nll = -(row[labels[r]] - mx - log_sum);
    total += (1.0 - smoothing) * nll + smoothing * smooth / static_cast<double>(c);
  }
  return total / static_cast<double>(n);
}

void softmaxCrossEntropyBackward(const float* probs, const std::int64_t* labels, std::int64_t n, std::int64_t c,
                                 float smoothing, float scale, float* dlogits, bool accumulate) {
  const float off = smoothing / static_cast<float>(c);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t j = 0; j < c; ++j) {
      const float target = (j == labels[r] ? 1.0f - smoothing : 0.0f) + off;
      const float d = (probs[r * c + j] - target) * scale;
      dlogits[r * c + j] = accumulate ? dlogits[r * c + j] + d : d;
    }
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
