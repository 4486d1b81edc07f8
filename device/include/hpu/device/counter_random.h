// Counter-based random numbers: draw c of the stream `key` is a pure
// function of (key, c) (splitmix64's finalizer of key + c x 2^64/phi), so any
// thread can draw any part of a stream, in any order, with the same result.
// Dropout masks and attention's dropout draw this way.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

namespace hpu::device {

inline std::uint64_t counterDraw(std::uint64_t key, std::uint64_t counter) {
  std::uint64_t z = key + counter * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace hpu::device
