// Softmax, softmax + cross-entropy and mean squared error over rows.
#pragma once

#include <cstdint>

namespace hpu::device::kernels {

// probs [n, c] = softmax(logits) per row; returns the mean over rows of
// (1 - s) * nll + s * mean_c(-log p) (torch's label smoothing s).
// REQUIRES: 0 <= labels[r] < c.
double softmaxCrossEntropyForward(const float* logits, const std::int64_t* labels, std::int64_t n, std::int64_t c,
                                  float smoothing, float* probs);
// dlogits (+)= (probs - target) * scale, target = (1 - s) onehot + s / c.
void softmaxCrossEntropyBackward(const float* probs, const std::int64_t* labels, std::int64_t n, std::int64_t c,
                                 float smoothing, float scale, float* dlogits, bool accumulate);

// y = softmax(x) per row of [rows, c]; backward: dx (+)= y * (dy - <y, dy>).
void softmaxForward(const float* x, std::int64_t rows, std::int64_t c, float* y);
void softmaxBackward(const float* y, const float* dy, std::int64_t rows, std::int64_t c, float* dx, bool accumulate);

// mean((a - b)^2) over n elements.
double mseForward(const float* a, const float* b, std::int64_t n);

// Rows of logits [n, c] whose arg-max equals the label.
std::int64_t countArgmaxMatches(const float* logits, const std::int64_t* labels, std::int64_t n, std::int64_t c);

}  // namespace hpu::device::kernels
