// Elementwise reduction kernels of the collectives. bfloat16 is widened to
// float, combined, and rounded back by the project's one bfloat16 rule
// (hpu/numerics/bfloat16.h: nearest-even, NaN as 0xFFFF); min and max
// propagate NaN. Operand order is part of the contract (out =
// a op b) so that every rank computes bit-identical results.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hpu/comm/buffer_view.h"

namespace hpu::comm::detail {

// out[i] = a[i] op b[i] for i < count; kAvg combines as a sum.
// `out` may alias `a` or `b` exactly. REQUIRES: dtype is float32 or bfloat16.
void combine(DType dtype, ReduceOp op, const std::byte* a, const std::byte* b, std::byte* out, std::size_t count);

// data[i] = data[i] / divisor (the last step of kAvg).
void divide(DType dtype, std::byte* data, std::size_t count, int divisor);

}  // namespace hpu::comm::detail
