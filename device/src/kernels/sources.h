// How the packed kernels (isa/packed_gemm.h) read a stored matrix S: a
// Source gives S[row][col] as data() + rowOffset(row) + an offset that
// depends on col only, and splits up to 16 consecutive columns into runs of
// lanes that are contiguous in memory. Plain C++, the same for every
// instruction set.
#pragma once

#include <cstdint>

namespace hpu::device::kernels::packed {

// Lanes [0, count) of a vector as a bit mask (count clamped to 0..16).
constexpr std::uint32_t laneMask(std::int64_t count) {
  return count >= 16 ? 0xFFFFu : count <= 0 ? 0u : (1u << count) - 1;
}

// Lanes [lo, hi) (empty when hi <= lo).
constexpr std::uint32_t laneRange(std::int64_t lo, std::int64_t hi) { return laneMask(hi) & ~laneMask(lo); }

// Up to 16 runs of lanes: run r loads lanes mask[r] from data + offset[r] +
// lane (offset is the element offset of lane 0 for that run, the row's
// excluded).
struct Runs {
  int count = 0;
  std::uint32_t mask[16];
  std::int64_t offset[16];
};

// A plain row-major matrix with rows ld floats apart.
struct DenseSource {
  const float* base;
  std::int64_t ld;
  const float* data() const { return base; }
  std::int64_t rowOffset(std::int64_t row) const { return row * ld; }
  void columnRuns(std::int64_t col0, std::int64_t count, Runs& runs) const {
    runs.count = 1;
    runs.mask[0] = laneMask(count);
    runs.offset[0] = col0;
  }
};

}  // namespace hpu::device::kernels::packed
