// How a parameter is split across the ranks of a tensor-parallel group
// (Megatron-LM's layout): along dimension `dim` into `parts` equal pieces,
// this rank holding piece `index`. With blocks > 1 that dimension is the
// concatenation of `blocks` equal blocks, each split alike (GPT-2's fused
// q, k, v projection: each rank holds its heads of all three). dim < 0:
// every rank holds the whole parameter.
//
// A vocabulary's rows (an embedding, an output head) may be padded before
// they are split (Megatron-LM's make_vocab_size_divisible_by): the pieces
// together hold `padding` rows past the whole parameter's, at the end of
// dimension `dim`. Those rows are zero, belong to no token, and exist on the
// devices only: the whole parameter (what checkpoints, exports and
// pretrained files hold, what init draws) is the unpadded one, and every
// run below covers real rows only. A padded parameter is never split in
// blocks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "hpu/core/tensor/shape.h"

namespace hpu::core {

// A vocabulary of `rows` tokens padded to a multiple of `multiple` rows:
// ceil(rows / multiple) x multiple. REQUIRES: multiple >= 1.
inline std::int64_t paddedRows(std::int64_t rows, std::int64_t multiple) {
  return (rows + multiple - 1) / multiple * multiple;
}

struct Shard {
  int dim = -1;
  int parts = 1;
  int index = 0;
  int blocks = 1;
  std::int64_t padding = 0;  // rows along `dim` the pieces hold past the whole parameter's

  // Piece `index` of `parts` of dimension `dim` of `rows` rows padded to a
  // multiple of `multiple` first (REQUIRES: parts divides multiple).
  static Shard paddedPiece(int dim, std::int64_t rows, std::int64_t multiple, int parts, int index) {
    return {.dim = dim, .parts = parts, .index = index, .padding = paddedRows(rows, multiple) - rows};
  }

  // Whether this rank's tensor is not the whole parameter.
  bool split() const { return dim >= 0 && (parts > 1 || padding > 0); }
  // The whole parameter's shape, from this rank's piece.
  Shape fullShape(const Shape& local) const {
    if (!split()) return local;
    std::vector<std::int64_t> dims(local.dims().begin(), local.dims().end());
    dims[static_cast<std::size_t>(dim)] = dims[static_cast<std::size_t>(dim)] * parts - padding;
    return Shape(std::span<const std::int64_t>(dims));
  }
  // Elements of the padding rows of the whole (every piece's together).
  std::int64_t paddingNumel(const Shape& local) const {
    if (padding == 0 || dim < 0) return 0;
    return padding * (local.numel() / local[dim]);
  }
  // Calls f(full_offset, local_offset, count) for each contiguous run of
  // this rank's elements in the whole row-major parameter, in order
  // (padding rows are in none).
  template <class F>
  void forEachRun(const Shape& local, F f) const {
    if (!split()) {
      f(std::int64_t{0}, std::int64_t{0}, local.numel());
      return;
    }
    std::int64_t outer = 1, inner = 1;
    for (int d = 0; d < dim; ++d) outer *= local[d];
    for (int d = dim + 1; d < local.ndim(); ++d) inner *= local[d];
    const std::int64_t mid = local[dim], piece = mid / blocks, whole = mid * parts - padding;
    // Padding is at the end of the whole dimension: this piece's real rows.
    const std::int64_t real = std::clamp(whole - index * piece, std::int64_t{0}, piece);
    if (real == 0) return;
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t b = 0; b < blocks; ++b)
        f((o * whole + b * piece * parts + index * piece) * inner, (o * mid + b * piece) * inner, real * inner);
  }
  // Copies this rank's piece (`piece`, shaped `local`) into the whole
  // parameter's values / out of them (padding rows left as they are).
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
  // The whole parameter's values from this piece alone. REQUIRES: parts == 1
  // (only padding sets the piece apart from the whole).
  std::vector<float> whole(const Shape& local, std::span<const float> piece) const {
    if (!split()) return {piece.begin(), piece.end()};
    std::vector<float> out(static_cast<std::size_t>(fullShape(local).numel()));
    place(local, piece, out);
    return out;
  }
  // The piece rank `rank` of a group of `ranks` holds of this split.
  Shard ofRank(int rank, int ranks) const {
    Shard s = *this;
    if (split()) s.index = rank / (ranks / parts);
    return s;
  }
};

}  // namespace hpu::core
