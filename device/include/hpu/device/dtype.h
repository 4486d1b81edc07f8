// Element types of emulated device tensors.
//
// Floating-point tensors are held physically as float32 whose values are
// exactly representable in the logical dtype (a bfloat16 tensor holds floats
// rounded to bfloat16); memory accounting uses the logical size. Integer
// tensors are held in their own width. Thread-safe: pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace hpu::device {

enum class DType {
  kFloat32,
  kBFloat16,
  kFloat16,
  kFloat8E4M3,
  kFloat8E5M2,
  kInt64,
  kInt32,
  kUInt8,
  kBool,
  kFloat64,  // named so it can be refused with a clear error; no device supports it
};

// Bytes one element occupies on a real device (the allocator counts these).
std::size_t logicalSize(DType t);
// Bytes one element occupies in the emulator's host buffer.
std::size_t physicalSize(DType t);
bool isFloating(DType t);
// E4M3 or E5M2.
bool isFp8(DType t);
// Canonical name, as PyTorch spells it: "float32", "bfloat16", "float8_e4m3fn" ...
std::string_view dtypeName(DType t);
// Accepts canonical names and common aliases ("fp32", "bf16", "fp16", "half").
std::optional<DType> parseDType(std::string_view name);

}  // namespace hpu::device
