#include "exp_loops.h"

#include "fast_exp.h"
#include "hpu/device/vector_clones.h"

namespace hpu::device::kernels::detail {

float expShiftSum(float* __restrict x, std::int64_t n, float shift) {
  float lanes[16] = {};
  std::int64_t j = 0;
  onVectorLevel([&]() HPU_LOOP_BODY {
    for (; j + 16 <= n; j += 16)
      for (int l = 0; l < 16; ++l) lanes[l] += (x[j + l] = fastExp(x[j + l] - shift));
  });
  float total = 0.0f;
  for (float v : lanes) total += v;
  for (; j < n; ++j) total += (x[j] = fastExp(x[j] - shift));
  return total;
}

void expShift(float* __restrict x, std::int64_t n, float shift) {
  onVectorLevel([&]() HPU_LOOP_BODY {
    for (std::int64_t j = 0; j < n; ++j) x[j] = fastExp(x[j] - shift);
  });
}

double sumExp(const float* __restrict x, std::int64_t n, float shift) {
  float lanes[16] = {};
  std::int64_t j = 0;
  onVectorLevel([&]() HPU_LOOP_BODY {
    for (; j + 16 <= n; j += 16)
      for (int l = 0; l < 16; ++l) lanes[l] += fastExp(x[j + l] - shift);
  });
  double total = 0;
  for (float v : lanes) total += v;
  for (; j < n; ++j) total += fastExp(x[j] - shift);
  return total;
}

}  // namespace hpu::device::kernels::detail
