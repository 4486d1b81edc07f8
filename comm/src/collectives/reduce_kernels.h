// Elementwise reduction kernels of the collectives. bfloat16 is widened to
// float, combined, and rounded back to nearest-even (NaN stays a quiet NaN);
// min and max propagate NaN. Operand order is part of the contract (out =
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

// bfloat16 <-> float conversions used by the kernels (round to nearest even).
float bf16ToFloat(std::uint16_t bits);
std::uint16_t floatToBf16(float value);

}  // namespace hpu::comm::detail
