// Typed, non-owning views of the buffers collectives work on, and the
// reduction operators. bfloat16 travels as its raw uint16 bits; reductions
// widen to float, combine, and round back to nearest-even.
// Thread-safety: plain values; the caller owns the memory they point at.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace hpu::comm {

enum class DType : std::uint8_t {
  kFloat32,
  kBFloat16,
  kByte,  // opaque bytes: broadcast and allgather only, never reduced
};

enum class ReduceOp : std::uint8_t { kSum, kAvg, kMin, kMax };

std::string_view dtypeName(DType dtype);  // "float32", "bfloat16", "byte"
std::string_view reduceOpName(ReduceOp op);  // "sum", "avg", "min", "max"
std::size_t elementSize(DType dtype);

// A mutable buffer of `count` elements of `dtype`.
struct BufferView {
  std::byte* data = nullptr;
  std::size_t count = 0;
  DType dtype = DType::kFloat32;

  BufferView() = default;
  BufferView(std::span<float> values)  // NOLINT: implicit, so spans of float convert
      : data(reinterpret_cast<std::byte*>(values.data())), count(values.size()), dtype(DType::kFloat32) {}
  BufferView(std::span<std::byte> bytes) : data(bytes.data()), count(bytes.size()), dtype(DType::kByte) {}
  // bfloat16 values given as their uint16 bit patterns.
  static BufferView bfloat16(std::span<std::uint16_t> bits) {
    BufferView view;
    view.data = reinterpret_cast<std::byte*>(bits.data());
    view.count = bits.size();
    view.dtype = DType::kBFloat16;
    return view;
  }
  std::size_t bytes() const { return count * elementSize(dtype); }
};

// A read-only buffer (the input of allgather and reduceScatter).
struct ConstBufferView {
  const std::byte* data = nullptr;
  std::size_t count = 0;
  DType dtype = DType::kFloat32;

  ConstBufferView() = default;
  ConstBufferView(std::span<const float> values)  // NOLINT: implicit
      : data(reinterpret_cast<const std::byte*>(values.data())), count(values.size()), dtype(DType::kFloat32) {}
  ConstBufferView(std::span<const std::byte> bytes) : data(bytes.data()), count(bytes.size()), dtype(DType::kByte) {}
  ConstBufferView(BufferView view) : data(view.data), count(view.count), dtype(view.dtype) {}  // NOLINT
  static ConstBufferView bfloat16(std::span<const std::uint16_t> bits) {
    ConstBufferView view;
    view.data = reinterpret_cast<const std::byte*>(bits.data());
    view.count = bits.size();
    view.dtype = DType::kBFloat16;
    return view;
  }
  std::size_t bytes() const { return count * elementSize(dtype); }
};

}  // namespace hpu::comm
