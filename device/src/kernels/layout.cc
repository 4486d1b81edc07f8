#include "hpu/device/kernels/layout.h"

#include <array>
#include <cstring>

#include "hpu/device/check.h"
#include "hpu/device/threading.h"

namespace hpu::device::kernels {

void copy(const float* src, float* dst, std::int64_t n) {
  static ParallelSite site("copy");
  parallelFor(site, n, 1 << 12, static_cast<double>(n), [&](std::int64_t begin, std::int64_t end) {
    std::memcpy(dst + begin, src + begin, static_cast<std::size_t>(end - begin) * sizeof(float));
  });
}

void permute(const float* src, std::span<const std::int64_t> shape, std::span<const int> perm, float* dst,
             bool accumulate) {
  const int n = static_cast<int>(shape.size());
  HPU_CHECK(n <= 6 && static_cast<int>(perm.size()) == n, "permute of {} dimensions by {}", n, perm.size());
  std::array<std::int64_t, 6> src_stride{}, out_dims{}, out_stride_in_src{};
  std::int64_t total = 1;
  for (int i = n - 1; i >= 0; --i) {
    src_stride[static_cast<std::size_t>(i)] = total;
    total *= shape[static_cast<std::size_t>(i)];
  }
  if (total == 0) return;
  for (int i = 0; i < n; ++i) {
    out_dims[static_cast<std::size_t>(i)] = shape[static_cast<std::size_t>(perm[static_cast<std::size_t>(i)])];
    out_stride_in_src[static_cast<std::size_t>(i)] =
        src_stride[static_cast<std::size_t>(perm[static_cast<std::size_t>(i)])];
  }
  // The innermost output dimension is copied as a run: contiguous in src
  // when it is src's last dimension (splitting heads keeps head_dim last).
  const std::int64_t inner = n == 0 ? 1 : out_dims[static_cast<std::size_t>(n - 1)];
  const std::int64_t inner_stride = n == 0 ? 1 : out_stride_in_src[static_cast<std::size_t>(n - 1)];
  const std::int64_t outer = total / inner;
  static ParallelSite site("permute");
  parallelFor(site, outer, 1, static_cast<double>(total), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t o = begin; o < end; ++o) {
      // The source offset of output row o.
      std::int64_t rest = o, from = 0;
      for (int i = n - 2; i >= 0; --i) {
        const auto u = static_cast<std::size_t>(i);
        from += (rest % out_dims[u]) * out_stride_in_src[u];
        rest /= out_dims[u];
      }
      const float* s = src + from;
      float* d = dst + o * inner;
      if (inner_stride == 1 && !accumulate) {
        std::memcpy(d, s, static_cast<std::size_t>(inner) * sizeof(float));
      } else {
        for (std::int64_t j = 0; j < inner; ++j) d[j] = accumulate ? d[j] + s[j * inner_stride] : s[j * inner_stride];
      }
    }
  });
}

}  // namespace hpu::device::kernels
