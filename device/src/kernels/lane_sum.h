// Sums that vectorise without a chain of dependent adds, and still give the
// same bits in every vector_clones.h copy: the terms go through kLanes
// running sums in a fixed order, which are then added in lane order, then
// the tail's terms in order.
// Thread-safety: a pure function.
#pragma once

#include <cstdint>

#include "hpu/device/vector_clones.h"

namespace hpu::device::kernels::detail {

// sum of term(i) for i in [0, n), in T through kLanes lanes.
// (The running sums are locals of the vectorised body, so that they stay in
// registers: kept outside it, they went through memory on every step.)
template <class T, int kLanes, class Term>
T laneSum(std::int64_t n, const Term& term) {
  T total = 0;
  onVectorLevel([&]() HPU_LOOP_BODY {
    T lanes[kLanes] = {};
    std::int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
#pragma GCC unroll 16
      for (int l = 0; l < kLanes; ++l) lanes[l] += term(i + l);
    T sum = 0;
    for (T v : lanes) sum += v;
    for (; i < n; ++i) sum += term(i);
    total = sum;
  });
  return total;
}

}  // namespace hpu::device::kernels::detail
