// Tensor parallelism's ops (Megatron-LM's mappings between a replicated
// activation and one split across the ranks of a tensor-parallel group), and
// the vocabulary-parallel embedding lookup and cross-entropy, with which no
// rank ever holds a whole vocabulary's logits.
//
// Every rank of the group runs the same ops in the same order; each op that
// communicates does so through ParallelGroup (the strategy's process group),
// in forward or in backward as documented. On a shape-only device the
// collectives are still issued (with no data), so that they are recorded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "hpu/core/ops/ops.h"

namespace hpu::core::ops {

enum class ParallelReduce { kSum, kMax };

// The ranks a layer is split across. Implemented by the strategies over
// their process groups.
class ParallelGroup {
 public:
  virtual ~ParallelGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place: every rank ends with the elementwise reduction over the group
  // of `count` values at `data`, carried as `wire` (float32 or bfloat16:
  // values are rounded to it), equal in every bit on every rank. `data` is
  // null on a shape-only device.
  virtual void allreduce(float* data, std::size_t count, DType wire, ParallelReduce op) = 0;
  // out [size() x count] = every rank's `in` [count], in rank order. Null
  // pointers on a shape-only device.
  virtual void allgather(const float* in, std::size_t count, DType wire, float* out) = 0;
  // out [count] = this rank's block of the sum over the group of every
  // rank's `in` [size() x count] (block r: rank r's). Null pointers on a
  // shape-only device.
  virtual void reduceScatter(const float* in, std::size_t count, DType wire, float* out) = 0;
  // The group of `count` consecutive ranks this rank is one of (ranks
  // rank() / count x count onwards), made at the first call and kept by
  // this group. REQUIRES: count divides size(); every rank of the group
  // asks for it.
  virtual ParallelGroup& subgroupOf(int count) = 0;
  // All-to-all of rows `width` values wide (expert parallelism's tokens):
  // `in` holds size() consecutive blocks, send_rows[d] rows for rank d;
  // `out` receives recv_rows[s] rows from each rank s, in rank order,
  // carried as `wire` (float32 or bfloat16). Rank s's send_rows[d] must be
  // rank d's recv_rows[s]. Null pointers on a shape-only device.
  virtual void alltoall(const float* in, std::span<const std::int64_t> send_rows, std::int64_t width, DType wire,
                        float* out, std::span<const std::int64_t> recv_rows) = 0;
  // What every rank sends this one: `counts` holds size() runs of
  // `per_rank` values, run d for rank d; the result holds size() runs, run
  // s being rank s's run for this rank.
  virtual std::vector<std::int64_t> alltoallCounts(std::span<const std::int64_t> counts, std::size_t per_rank) = 0;
};

// Forward: x itself. Backward: the gradient is summed over the group. The
// input of column-parallel layers (each rank's layer sees all of x and
// contributes a part of x's gradient); one call can feed several layers.
Tensor copyToParallel(const Tensor& x, ParallelGroup& group);
// Forward: the sum over the group of every rank's `partial`, plus `bias`
// (if defined) once. Backward: the output's gradient, unchanged, to
// `partial` on every rank; bias's gradient is its sum over rows. The output
// of a row-parallel layer. Given `partial` as a temporary (nothing else
// holding it) and with no backward to record, the sum is taken in its memory,
// as an in-place all-reduce does (inference: no second copy of the hidden
// states at the all-reduce).
Tensor reduceFromParallel(Tensor partial, ParallelGroup& group, const Tensor& bias = Tensor());
// Forward: x's last dimension concatenated over the group in rank order
// ([..., C] -> [..., C x size]). Backward: this rank's columns of the
// gradient. Logits for sampling a token.
Tensor gatherFromParallel(const Tensor& x, ParallelGroup& group);
// Expert parallelism's exchange: the rows of x [M, H] go to the ranks of
// `group`, send_rows[d] consecutive ones to rank d; the result [sum of
// recv_rows, H] holds the recv_rows[s] rows rank s sent, in rank order.
// Backward: the gradient's rows go back the way they came.
Tensor exchangeRows(const Tensor& x, std::vector<std::int64_t> send_rows, std::vector<std::int64_t> recv_rows,
                    ParallelGroup& group);

// Sequence parallelism (Megatron-LM's option of tensor parallelism):
// between the tensor-parallel regions, activations [B, T, ...] are split
// along the sequence, each rank holding T / size positions, and the norms,
// dropouts and residual adds run on that part. While a
// SequenceParallelScope that is on lives on a thread, toParallelRegion and
// fromParallelRegion gather and reduce-scatter the sequence instead of
// copyToParallel and reduceFromParallel, and the helpers below split.
class SequenceParallelScope {
 public:
  explicit SequenceParallelScope(bool on);
  ~SequenceParallelScope();
  SequenceParallelScope(const SequenceParallelScope&) = delete;
  SequenceParallelScope& operator=(const SequenceParallelScope&) = delete;

 private:
  bool previous_;
};
bool sequenceParallel();

// The input of column-parallel layers: copyToParallel(x), or under sequence
// parallelism the whole sequence gathered from every rank's positions
// (backward: the gradient reduce-scattered back to them).
Tensor toParallelRegion(const Tensor& x, ParallelGroup& group);
// The output of row-parallel layers: reduceFromParallel, or under sequence
// parallelism the sum reduce-scattered to this rank's positions, plus bias
// (backward: the gradient gathered). `partial` as reduceFromParallel's.
Tensor fromParallelRegion(Tensor partial, ParallelGroup& group, const Tensor& bias = Tensor());
// Under sequence parallelism, this rank's positions of x [B, T, ...], which
// every rank holds whole (backward: the gradient gathered, whole on every
// rank again); else x. Throws UsageError when size() does not divide T.
Tensor scatterToSequence(const Tensor& x, ParallelGroup& group);
// A parameter read by ops on this rank's positions only (a norm's weight):
// under sequence parallelism a view whose gradient is summed over the
// group; else p.
Tensor sequenceParallelParameter(const Tensor& p, ParallelGroup& group);
// Where this rank's positions of x [B, T / size, ...] sit in the whole
// sequence, for dropout to draw the whole sequence's masks; {} unless
// sequence parallelism is on.
SequencePart sequencePartOf(const Tensor& x, ParallelGroup& group);

// The rows [start, start + weight.size(0)) of an embedding of `vocab` rows:
// indices in that range are looked up, the others give zeros (the sum over
// the group, reduceFromParallel, is the whole lookup). Throws for an index
// outside [0, vocab). The row `padding_idx` (a full-vocabulary index)
// learns nothing.
Tensor vocabShardEmbedding(const Tensor& indices, const Tensor& weight, std::int64_t start, std::int64_t vocab,
                           std::optional<std::int64_t> padding_idx = std::nullopt);

// crossEntropy() over logits split along the vocabulary: this rank holds
// classes [start, start + logits.size(-1)) of `vocab`; columns from `vocab`
// on (a padded vocabulary's rows) are no class: they take no probability,
// as logits of -inf would, and get a zero gradient. Three all-reduces of
// one value per row (max, sum of exponentials, target logit) in forward,
// none in backward; every rank returns the same loss and writes the
// gradient of its own classes. REQUIRES: o.label_smoothing == 0.
Tensor vocabParallelCrossEntropy(const Tensor& logits, const Tensor& labels, std::int64_t start, std::int64_t vocab,
                                 ParallelGroup& group, const CrossEntropyOptions& o = {});

}  // namespace hpu::core::ops
