// Data movement between layouts of row-major tensors.
#pragma once

#include <cstdint>
#include <span>

namespace hpu::device::kernels {

// dst[0, n) = src[0, n) (no overlap), in ranges on the intra-op threads: each
// thread writes the rows the next kernel's row split gives it.
void copy(const float* src, float* dst, std::int64_t n);

// dst = src with its dimensions reordered: dst dimension i is src dimension
// perm[i] (torch's permute, made contiguous). `shape` is src's (at most 6
// dimensions). With `accumulate`, dst += instead of =.
void permute(const float* src, std::span<const std::int64_t> shape, std::span<const int> perm, float* dst,
             bool accumulate = false);

}  // namespace hpu::device::kernels
