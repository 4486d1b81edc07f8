#include "hpu/device/dtype.h"

#include <array>
#include <utility>

namespace hpu::device {

std::size_t logicalSize(DType t) {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kBFloat16: return 2;
    case DType::kFloat16: return 2;
    case DType::kFloat8E4M3: return 1;
    case DType::kFloat8E5M2: return 1;
    case DType::kInt64: return 8;
    case DType::kInt32: return 4;
    case DType::kUInt8: return 1;
    case DType::kBool: return 1;
    case DType::kFloat64: return 8;
  }
  return 0;
}

std::size_t physicalSize(DType t) { return isFloating(t) ? sizeof(float) : logicalSize(t); }

bool isFp8(DType t) { return t == DType::kFloat8E4M3 || t == DType::kFloat8E5M2; }

bool isFloating(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kBFloat16:
    case DType::kFloat16:
    case DType::kFloat8E4M3:
    case DType::kFloat8E5M2: return true;
    default: return false;
  }
}

std::string_view dtypeName(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat16: return "float16";
    case DType::kFloat8E4M3: return "float8_e4m3fn";
    case DType::kFloat8E5M2: return "float8_e5m2";
    case DType::kInt64: return "int64";
    case DType::kInt32: return "int32";
    case DType::kUInt8: return "uint8";
    case DType::kBool: return "bool";
    case DType::kFloat64: return "float64";
  }
  return "?";
}

std::optional<DType> parseDType(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, DType>, 19> kNames{{
      {"float32", DType::kFloat32},     {"fp32", DType::kFloat32},
      {"float", DType::kFloat32},       {"bfloat16", DType::kBFloat16},
      {"bf16", DType::kBFloat16},       {"float16", DType::kFloat16},
      {"fp16", DType::kFloat16},        {"half", DType::kFloat16},
      {"float8_e4m3fn", DType::kFloat8E4M3}, {"fp8_e4m3", DType::kFloat8E4M3},
      {"float8_e5m2", DType::kFloat8E5M2},   {"fp8_e5m2", DType::kFloat8E5M2},
      {"int64", DType::kInt64},         {"long", DType::kInt64},
      {"int32", DType::kInt32},         {"uint8", DType::kUInt8},
      {"bool", DType::kBool},           {"float64", DType::kFloat64},
      {"double", DType::kFloat64},
  }};
  for (const auto& [n, t] : kNames)
    if (n == name) return t;
  return std::nullopt;
}

}  // namespace hpu::device
