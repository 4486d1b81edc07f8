// Loops over e^x (fast_exp.h) that the softmax of attention and of the
// cross-entropy run, in copies per instruction set (vector_clones.h):
// sums go through 16 lanes in a fixed order, so every copy gives the same
// bits.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

namespace hpu::device::kernels::detail {

// x[j] = e^(x[j] - shift) for j < n; returns their sum.
float expShiftSum(float* x, std::int64_t n, float shift);
// x[j] = e^(x[j] - shift) for j < n.
void expShift(float* x, std::int64_t n, float shift);
// sum_j e^(x_j - shift), the lanes added up in double.
double sumExp(const float* x, std::int64_t n, float shift);

}  // namespace hpu::device::kernels::detail
