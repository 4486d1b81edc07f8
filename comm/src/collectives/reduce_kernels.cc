#include "reduce_kernels.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "../check.h"

namespace hpu::comm::detail {
namespace {

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
  for (std::size_t i = 0; i < count; ++i) out[i] = floatToBf16(Op::apply(bf16ToFloat(a[i]), bf16ToFloat(b[i])));
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

float bf16ToFloat(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

std::uint16_t floatToBf16(float value) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

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
    for (std::size_t i = 0; i < count; ++i) values[i] = floatToBf16(bf16ToFloat(values[i]) / d);
  }
}

}  // namespace hpu::comm::detail
