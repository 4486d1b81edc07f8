#include "reduce_kernels.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "../check.h"
#include "hpu/numerics/bfloat16.h"

namespace hpu::comm::detail {
namespace {

using numerics::fromBFloat16Bits;
using numerics::toBFloat16Bits;

struct Sum {
  static float apply(float a, float b) { return a + b; }
};
struct Min {
  static float apply(float a, float b) { return (a < b || a != a) ? a : b; }
};
struct Max {
  static float apply(float a, float b) { return (a > b || a != a) ? a : b; }
};

template <class Op>
void combineFloat(const float* a, const float* b, float* out, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) out[i] = Op::apply(a[i], b[i]);
}

template <class Op>
void combineBf16(const std::uint16_t* a, const std::uint16_t* b, std::uint16_t* out, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i)
    out[i] = toBFloat16Bits(Op::apply(fromBFloat16Bits(a[i]), fromBFloat16Bits(b[i])));
}

template <class Op>
void combineTyped(DType dtype, const std::byte* a, const std::byte* b, std::byte* out, std::size_t count) {
  if (dtype == DType::kFloat32) {
    combineFloat<Op>(reinterpret_cast<const float*>(a), reinterpret_cast<const float*>(b),
                     reinterpret_cast<float*>(out), count);
  } else {
    combineBf16<Op>(reinterpret_cast<const std::uint16_t*>(a), reinterpret_cast<const std::uint16_t*>(b),
                    reinterpret_cast<std::uint16_t*>(out), count);
  }
}

}  // namespace

void combine(DType dtype, ReduceOp op, const std::byte* a, const std::byte* b, std::byte* out, std::size_t count) {
  HPU_COMM_CHECK(dtype == DType::kFloat32 || dtype == DType::kBFloat16, "reductions need float32 or bfloat16");
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: combineTyped<Sum>(dtype, a, b, out, count); return;
    case ReduceOp::kMin: combineTyped<Min>(dtype, a, b, out, count); return;
    case ReduceOp::kMax: combineTyped<Max>(dtype, a, b, out, count); return;
  }
}

void divide(DType dtype, std::byte* data, std::size_t count, int divisor) {
  const float d = static_cast<float>(divisor);
  if (dtype == DType::kFloat32) {
    auto* values = reinterpret_cast<float*>(data);
    for (std::size_t i = 0; i < count; ++i) values[i] /= d;
  } else {
    HPU_COMM_CHECK(dtype == DType::kBFloat16, "avg needs float32 or bfloat16");
    auto* values = reinterpret_cast<std::uint16_t*>(data);
    for (std::size_t i = 0; i < count; ++i) values[i] = toBFloat16Bits(fromBFloat16Bits(values[i]) / d);
  }
}

}  // namespace hpu::comm::detail
