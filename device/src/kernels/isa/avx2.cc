// The AVX2 + FMA kernels, compiled for
// that instruction set whatever the build's -march; they run only where
// cpuIsa() selects them. The standard and project headers come first, so
// that only the kernels below the pragma are compiled for the target (an
// inline std:: function compiled for it could otherwise be the copy the
// linker keeps for the whole program).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../conv_geometry.h"
#include "../sources.h"
#include "hpu/device/threading.h"
#include "kernels.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
#include "kernels_of.h"
#include "simd_avx2.h"

namespace hpu::device::kernels {
const IsaKernels kAvx2Kernels = packed::kernelsOf<packed::Avx2, false>();
}  // namespace hpu::device::kernels
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
