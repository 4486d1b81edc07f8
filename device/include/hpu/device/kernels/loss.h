// Softmax, softmax + cross-entropy and mean squared error over rows.
#pragma once

#include <cstdint>

namespace hpu::device::kernels {

// Cross-entropy of logits [n, c] against int64 labels [n], torch's with
// label smoothing s and ignore_index: a row whose label is ignore_index counts
// for nothing; every other row adds
//   (1 - s) (lse - x_label) + s (lse - mean_j x_j),   lse = log sum_j e^x_j.
// Returns the sum over the counted rows and sets *counted to their number;
// lse gets each row's log-sum-exp (what backward needs instead of the
// probabilities). Rows lie `stride` values apart (0: c); the values past
// the first c of a row (vocabulary padding) are no class and are not read.
// REQUIRES: every counted label in [0, c).
double crossEntropyForward(const float* logits, const std::int64_t* labels, std::int64_t n, std::int64_t c,
                           float smoothing, std::int64_t ignore_index, float* lse, std::int64_t* counted,
                           std::int64_t stride = 0);
// dlogits (+)= (softmax(x) - target) * scale on counted rows, target =
// (1 - s) onehot + s / c; ignored rows, and a row's values past its first c,
// get 0 (or keep what they hold).
void crossEntropyBackward(const float* logits, const std::int64_t* labels, const float* lse, std::int64_t n,
                          std::int64_t c, float smoothing, std::int64_t ignore_index, float scale, float* dlogits,
                          bool accumulate, std::int64_t stride = 0);
// y = softmax(x) per row of [rows, c]; backward: dx (+)= y * (dy - <y, dy>).
void softmaxForward(const float* x, std::int64_t rows, std::int64_t c, float* y);
void softmaxBackward(const float* y, const float* dy, std::int64_t rows, std::int64_t c, float* dx, bool accumulate);

// mean((a - b)^2) over n elements.
double mseForward(const float* a, const float* b, std::int64_t n);

// Rows of logits [n, c] whose arg-max equals the label.
std::int64_t countArgmaxMatches(const float* logits, const std::int64_t* labels, std::int64_t n, std::int64_t c);

}  // namespace hpu::device::kernels
