// How a parameter is split across the ranks of a tensor-parallel group
// (Megatron-LM's layout): along dimension `dim` into `parts` equal pieces,
// this rank holding piece `index`. With blocks > 1 that dimension is the
// concatenation of `blocks` equal blocks, each split alike (GPT-2's fused
// q, k, v projection: each rank holds its heads of all three). dim < 0:
// every rank holds the whole parameter.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "hpu/core/tensor/shape.h"

namespace hpu::core {

struct Shard {
  int dim = -1;
  int parts = 1;
  int index = 0;
  int blocks = 1;

  bool split() const { return dim >= 0 && parts > 1; }
  // The whole parameter's shape, from this rank's piece.
  Shape fullShape(const Shape& local) const {
    if (!split()) return local;
    std::vector<std::int64_t> dims(local.dims().begin(), local.dims().end());
    dims[static_cast<std::size_t>(dim)] *= parts;
    return Shape(std::span<const std::int64_t>(dims));
  }
  // Calls f(full_offset, local_offset, count) for each contiguous run of
  // this rank's elements in the whole row-major parameter, in order.
  template <class F>
  void forEachRun(const Shape& local, F f) const {
    if (!split()) {
      f(std::int64_t{0}, std::int64_t{0}, local.numel());
      return;
    }
    std::int64_t outer = 1, inner = 1;
    for (int d = 0; d < dim; ++d) outer *= local[d];
    for (int d = dim + 1; d < local.ndim(); ++d) inner *= local[d];
    const std::int64_t mid = local[dim], piece = mid / blocks;
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t b = 0; b < blocks; ++b)
        f((o * mid * parts + b * piece * parts + index * piece) * inner, (o * mid + b * piece) * inner, piece * inner);
  }
  // Copies this rank's piece (`piece`, shaped `local`) into the whole
  // parameter's values / out of them.
  void place(const Shape& local, std::span<const float> piece, std::span<float> whole) const {
    forEachRun(local, [&](std::int64_t full, std::int64_t mine, std::int64_t count) {
      std::copy_n(piece.begin() + mine, count, whole.begin() + full);
    });
  }
  void take(const Shape& local, std::span<const float> whole, std::span<float> piece) const {
    forEachRun(local, [&](std::int64_t full, std::int64_t mine, std::int64_t count) {
      std::copy_n(whole.begin() + full, count, piece.begin() + mine);
    });
  }
  // The piece rank `rank` of a group of `ranks` holds of this split.
  Shard ofRank(int rank, int ranks) const {
    Shard s = *this;
    if (split()) s.index = rank / (ranks / parts);
    return s;
  }
};

}  // namespace hpu::core
