// Serial references and deterministic inputs for the collective tests.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <ranges>
#include <vector>

#include "hpu/comm/buffer_view.h"
#include "hpu/numerics/bfloat16.h"

namespace hpu::comm::test_support {

inline float bf16ToFloat(std::uint16_t bits) { return numerics::fromBFloat16Bits(bits); }
inline std::uint16_t floatToBf16(float value) { return numerics::toBFloat16Bits(value); }

// Small integers (|v| <= 12): every partial sum of up to 8 ranks is exact in
// float32 and bfloat16, so any summation order gives the serial result.
inline float exactInput(int rank, std::size_t i) {
  return static_cast<float>(static_cast<int>((static_cast<std::size_t>(rank) * 7919 + i * 104729) % 25) - 12);
}

// Reference for the inputs exactInput(r, i) of the ranks r in `ranks`: op
// over them, rounded to `dtype` the way the kernels do (one rounding of the
// exact result). REQUIRES: `ranks` is not empty.
template <std::ranges::sized_range Ranks>
float referenceValue(ReduceOp op, DType dtype, const Ranks& ranks, std::size_t i) {
  auto rank = std::ranges::begin(ranks);
  float acc = exactInput(*rank, i);
  for (++rank; rank != std::ranges::end(ranks); ++rank) {
    const float v = exactInput(*rank, i);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc += v; break;
      case ReduceOp::kMin: acc = v < acc ? v : acc; break;
      case ReduceOp::kMax: acc = v > acc ? v : acc; break;
    }
  }
  if (op == ReduceOp::kAvg) {
    acc /= static_cast<float>(std::ranges::size(ranks));
    if (dtype == DType::kBFloat16) acc = bf16ToFloat(floatToBf16(acc));
  }
  return acc;
}

// The same for the ranks 0 .. worldSize - 1.
inline float referenceValue(ReduceOp op, DType dtype, int worldSize, std::size_t i) {
  return referenceValue(op, dtype, std::views::iota(0, worldSize), i);
}

// A buffer of `count` elements of `dtype` holding exactInput(rank, i).
struct TypedBuffer {
  DType dtype;
  std::vector<float> f32;
  std::vector<std::uint16_t> bf16;

  TypedBuffer(DType type, std::size_t count, int rank) : dtype(type) {
    if (type == DType::kFloat32) {
      f32.resize(count);
      for (std::size_t i = 0; i < count; ++i) f32[i] = exactInput(rank, i);
    } else {
      bf16.resize(count);
      for (std::size_t i = 0; i < count; ++i) bf16[i] = floatToBf16(exactInput(rank, i));
    }
  }
  BufferView view() { return dtype == DType::kFloat32 ? BufferView(std::span<float>(f32)) : BufferView::bfloat16(bf16); }
  float at(std::size_t i) const { return dtype == DType::kFloat32 ? f32[i] : bf16ToFloat(bf16[i]); }
  std::size_t size() const { return dtype == DType::kFloat32 ? f32.size() : bf16.size(); }
  // The raw bytes, to compare ranks bit for bit.
  std::vector<std::byte> bytes() const {
    std::vector<std::byte> out(size() * (dtype == DType::kFloat32 ? 4 : 2));
    if (!out.empty()) std::memcpy(out.data(), dtype == DType::kFloat32 ? static_cast<const void*>(f32.data()) : bf16.data(), out.size());
    return out;
  }
};

}  // namespace hpu::comm::test_support
