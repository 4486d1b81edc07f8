// 64-bit FNV-1a over bytes: op names (at compile time) and recipe texts.
// Thread-safe: pure function.
#pragma once

#include <cstdint>
#include <string_view>

namespace hpu::device::detail {

constexpr std::uint64_t fnv1a(std::string_view bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

}  // namespace hpu::device::detail
