// Serial references and deterministic inputs for the collective tests.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <ranges>
#include <string>
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

// Alltoall: rank src's block for rank dst holds alltoallValue(src, dst, i),
// an integer below 251, exact in float32, bfloat16 and as a byte.
inline float alltoallValue(int src, int dst, std::size_t i) {
  return static_cast<float>((static_cast<std::size_t>(src) * 31 + static_cast<std::size_t>(dst) * 7 + i) % 251);
}

// Uneven block sizes, zeros among them: 0, 1, 7 or 4097 elements by pair.
inline std::size_t unevenCount(int src, int dst, int salt) {
  constexpr std::size_t kCounts[] = {0, 1, 7, 4097};
  return kCounts[static_cast<std::size_t>(src * 3 + dst * 5 + salt) % 4];
}

// Rank `rank`'s buffers of an alltoall among `worldSize` ranks where rank s
// sends rank d count(s, d) elements of `dtype` (float32, bfloat16 or byte).
struct AlltoallCase {
  DType dtype;
  int rank;
  int worldSize;
  std::vector<std::size_t> sendCounts, recvCounts;
  std::vector<std::byte> input, output;

  template <class CountOf>
  AlltoallCase(DType type, int self, int n, CountOf count) : dtype(type), rank(self), worldSize(n) {
    for (int peer = 0; peer < n; ++peer) {
      sendCounts.push_back(count(self, peer));
      recvCounts.push_back(count(peer, self));
    }
    for (int dst = 0; dst < n; ++dst) {
      for (std::size_t i = 0; i < sendCounts[static_cast<std::size_t>(dst)]; ++i) {
        append(input, alltoallValue(self, dst, i));
      }
    }
    std::size_t received = 0;
    for (std::size_t c : recvCounts) received += c;
    output.assign(received * elementSize(dtype), std::byte{0xee});
  }

  ConstBufferView in() const {
    ConstBufferView view;
    view.data = input.data();
    view.count = input.size() / elementSize(dtype);
    view.dtype = dtype;
    return view;
  }
  BufferView out() {
    BufferView view;
    view.data = output.data();
    view.count = output.size() / elementSize(dtype);
    view.dtype = dtype;
    return view;
  }

  // "" when the output holds every rank's block for this one, else the first wrong element.
  std::string mismatch() const {
    std::size_t at = 0;
    for (int src = 0; src < worldSize; ++src) {
      for (std::size_t i = 0; i < recvCounts[static_cast<std::size_t>(src)]; ++i, ++at) {
        const float got = valueAt(at);
        const float expected = alltoallValue(src, rank, i);
        if (got != expected) {
          return "rank " + std::to_string(rank) + ": element " + std::to_string(i) + " of the block from rank " +
                 std::to_string(src) + " is " + std::to_string(got) + ", expected " + std::to_string(expected);
        }
      }
    }
    return "";
  }

 private:
  void append(std::vector<std::byte>& bytes, float value) const {
    const std::size_t at = bytes.size();
    bytes.resize(at + elementSize(dtype));
    if (dtype == DType::kFloat32) {
      std::memcpy(bytes.data() + at, &value, sizeof value);
    } else if (dtype == DType::kBFloat16) {
      const std::uint16_t bits = floatToBf16(value);
      std::memcpy(bytes.data() + at, &bits, sizeof bits);
    } else {
      bytes[at] = static_cast<std::byte>(value);
    }
  }
  float valueAt(std::size_t index) const {
    const std::byte* p = output.data() + index * elementSize(dtype);
    if (dtype == DType::kFloat32) {
      float value;
      std::memcpy(&value, p, sizeof value);
      return value;
    }
    if (dtype == DType::kBFloat16) {
      std::uint16_t bits;
      std::memcpy(&bits, p, sizeof bits);
      return bf16ToFloat(bits);
    }
    return static_cast<float>(std::to_integer<std::uint8_t>(*p));
  }
};

}  // namespace hpu::comm::test_support
