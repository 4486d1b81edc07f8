// The AVX-512 kernels (fp32 products and 2x2 max pooling; bf16 operands
// too, on a CPU without AVX512_BF16), compiled for that instruction set
// whatever the build's -march; they run only where cpuIsa() selects them.
// The standard and project headers come first, so that only the kernels
// below the pragma are compiled for the target (an inline std:: function
// compiled for it could otherwise be the copy the linker keeps for the
// whole program).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../conv_geometry.h"
#include "../sources.h"
#include "hpu/device/threading.h"
#include "kernels.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl")
#endif
#include "kernels_of.h"
#include "pool_avx512.h"
#include "simd_avx512.h"

namespace hpu::device::kernels {
namespace {
constexpr IsaKernels withPooling(IsaKernels k) {
  k.maxPool2x2 = &simd::maxPool2x2;
  return k;
}
}  // namespace
const IsaKernels kAvx512Kernels = withPooling(packed::kernelsOf<packed::Avx512, false>());
}  // namespace hpu::device::kernels
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
