// Hot elementwise loops compiled three times, for baseline x86-64, x86-64-v3
// (AVX2, FMA) and x86-64-v4 (AVX-512), and run in the copy of the level the
// kernels use: device::cpuIsa(), so HPU_CPU_ISA forces a copy (tests run
// every one on one host). The build itself targets baseline x86-64
// (cpu_isa.h); with -ffp-contract=off every copy computes the same bits
// (sums that vectorise go through fixed lanes).
//
//   onVectorLevel([&]() HPU_LOOP_BODY { for (...) y[i] = ...; });
//
// The body is inlined into a wrapper per level (always_inline), which GCC and
// clang then vectorise for that level. On other CPUs or compilers the body
// runs as it is.
// Thread-safety: as cpuIsa().
#pragma once

#include "hpu/device/cpu_isa.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HPU_LOOP_BODY __attribute__((always_inline))
#define HPU_VECTOR_LEVELS 1
#else
#define HPU_LOOP_BODY
#define HPU_VECTOR_LEVELS 0
#endif

namespace hpu::device {

namespace detail {
#if HPU_VECTOR_LEVELS
template <class Body>
__attribute__((target("arch=x86-64-v4"))) void onAvx512(const Body& body) {
  body();
}
template <class Body>
__attribute__((target("arch=x86-64-v3"))) void onAvx2(const Body& body) {
  body();
}
#endif
}  // namespace detail

template <class Body>
void onVectorLevel(const Body& body) {
#if HPU_VECTOR_LEVELS
  switch (cpuIsa()) {
    case CpuIsa::kAvx512Bf16:
    case CpuIsa::kAvx512:
      return detail::onAvx512(body);
    case CpuIsa::kAvx2:
      return detail::onAvx2(body);
    case CpuIsa::kPortable:
      break;
  }
#endif
  body();
}

}  // namespace hpu::device
