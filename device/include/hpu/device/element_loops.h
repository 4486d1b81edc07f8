// Elementwise loops on the intra-op team (threading.h): ranges of whole
// 1K-element blocks, shared out when the loop's ParallelSite has measured
// that it pays. For loops whose result does not depend on where ranges split.
// Thread-safety: as parallelFor.
#pragma once

#include <cstdint>

#include "hpu/device/threading.h"
#include "hpu/device/vector_clones.h"

namespace hpu::device {

inline constexpr std::int64_t kElementGrain = std::int64_t{1} << 10;

// body(begin, end) over consecutive ranges covering [0, n).
template <class Body>
void forElementRanges(ParallelSite& site, std::int64_t n, const Body& body) {
  parallelFor(site, n, kElementGrain, static_cast<double>(n), body);
}

// The same, each range run in onVectorLevel's copy for this CPU. Declare
// body HPU_LOOP_BODY so that it is compiled into each level's copy.
template <class Body>
void forElements(ParallelSite& site, std::int64_t n, const Body& body) {
  forElementRanges(site, n, [&](std::int64_t begin, std::int64_t end) {
    onVectorLevel([&]() HPU_LOOP_BODY { body(begin, end); });
  });
}

}  // namespace hpu::device
