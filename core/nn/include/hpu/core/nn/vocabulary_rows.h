// How a language model holds the rows of its vocabulary (the token
// embedding, the output head): split across a tensor-parallel group
// (Megatron-LM's vocabulary-parallel layers) after padding the vocabulary to
// a multiple of `multiple` rows (Megatron-LM's make_vocab_size_divisible_by x
// tensor-parallel size), so that any vocabulary splits. Padding rows are
// zero and belong to no token: lookups never reach them, and the logits of
// an output head's padding rows are left out of the loss and of generation.
#pragma once

#include <cstdint>

#include "hpu/core/nn/layers/linear.h"
#include "hpu/core/ops/parallel.h"
#include "hpu/core/tensor/shard.h"

namespace hpu::core::nn {

struct VocabularyRows {
  ops::ParallelGroup* group = nullptr;  // null: one rank holds every row
  std::int64_t multiple = 1;            // 1: no padding; else a multiple of the group's size

  int parts() const { return group != nullptr ? group->size() : 1; }
  int rank() const { return group != nullptr ? group->rank() : 0; }
  // Rows of a vocabulary of `vocab` tokens, padding included.
  std::int64_t padded(std::int64_t vocab) const { return paddedRows(vocab, multiple); }
  // This rank's piece of a [vocab, ...] parameter.
  Shard shard(std::int64_t vocab) const {
    if (parts() == 1 && multiple == 1) return {};
    return Shard::paddedPiece(0, vocab, multiple, parts(), rank());
  }
  // Rows this rank holds, and the first token among them.
  std::int64_t localRows(std::int64_t vocab) const { return padded(vocab) / parts(); }
  std::int64_t start(std::int64_t vocab) const { return localRows(vocab) * rank(); }
  // An output head [vocab, in] as a column-parallel Linear's split.
  LinearParallel linear() const {
    if (parts() == 1 && multiple == 1) return {};
    return {.split = ParallelSplit::kColumn, .group = group, .out_multiple = multiple};
  }
};

}  // namespace hpu::core::nn
