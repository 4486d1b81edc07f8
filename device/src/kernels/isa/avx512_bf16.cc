// The AVX512_BF16 kernels for bf16 operands (VDPBF16PS, fp32 accumulation), compiled for
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
#pragma clang attribute push(__attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")
#endif
#include "kernels_of.h"
#include "simd_avx512_bf16.h"

namespace hpu::device::kernels {
const IsaKernels kAvx512Bf16Kernels = packed::kernelsOf<packed::Avx512Bf16, true>();
}  // namespace hpu::device::kernels
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
