// Tensor parallelism's mappings, vocabulary-parallel embedding and
// cross-entropy.
#include "hpu/core/ops/parallel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "op_support.h"

namespace hpu::core::ops {

using namespace detail;

namespace {

// The wire type of a tensor's values: bfloat16 stays bfloat16, the rest
// travels as float32.
DType wireOf(const Tensor& t) { return t.dtype() == DType::kBFloat16 ? DType::kBFloat16 : DType::kFloat32; }

// t's gradient (+)= the sum over rows of g [rows, t.numel()].
void accumulateRowSum(const GradRef& t, const float* g, std::int64_t rows) {
  GradTarget target = gradTarget(t);
  if (target.data != nullptr) {
    const std::int64_t c = t.numel();
    if (!target.accumulate) std::fill(target.data, target.data + c, 0.0f);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < c; ++j) target.data[j] += g[r * c + j];
  }
  gradWritten(t);
}

// y [rows, bias.numel()] += bias on every row, recorded as an add.
void addBias(Tensor& y, const Tensor& bias) {
  const OpRecord op_record = record(op::kAdd, {&y, &bias});
  if (!computes(y)) return;
  const std::int64_t c = bias.numel(), rows = y.numel() / c;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < c; ++j) y.data()[r * c + j] += bias.data()[j];
}

}  // namespace

Tensor copyToParallel(const Tensor& x, ParallelGroup& group) {
  Tensor y = x.reshaped(x.shape());
  recordUnrecordedBackward("copy_to_parallel", y, {&x}, [x = GradRef(x), y = GradRef(y), &group] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    group.allreduce(gy.data(), static_cast<std::size_t>(gy.numel()), wireOf(gy), ParallelReduce::kSum);
    accumulateGrad(x, gy.data());
  });
  return y;
}

Tensor exchangeRows(const Tensor& x, std::vector<std::int64_t> send_rows, std::vector<std::int64_t> recv_rows,
                    ParallelGroup& group) {
  const auto ranks = static_cast<std::size_t>(group.size());
  const auto sum = [](const std::vector<std::int64_t>& v) { return std::accumulate(v.begin(), v.end(), std::int64_t{0}); };
  require(x.ndim() == 2 && send_rows.size() == ranks && recv_rows.size() == ranks && sum(send_rows) == x.size(0),
          "exchange_rows", [&] {
            return fmt::format("rows {} to send as [{}] to {} ranks", x.shape().str(), fmt::join(send_rows, ", "), ranks);
          });
  const std::int64_t width = x.size(1);
  Tensor y = like(x, {sum(recv_rows), width});
  group.alltoall(computes(x) ? x.data() : nullptr, send_rows, width, wireOf(x), computes(y) ? y.data() : nullptr,
                 recv_rows);
  recordUnrecordedBackward("exchange_rows", y, {&x},
                           [x = GradRef(x), y = GradRef(y), send_rows, recv_rows, width, &group] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    Tensor gx = like(gy, x.shape());
    group.alltoall(computes(gy) ? gy.data() : nullptr, recv_rows, width, wireOf(gy),
                   computes(gx) ? gx.data() : nullptr, send_rows);
    accumulateGrad(x, gx.data());
  });
  return finish(y);
}

Tensor reduceFromParallel(Tensor partial, ParallelGroup& group, const Tensor& bias) {
  require(!bias.defined() || (bias.ndim() == 1 && bias.size(0) == partial.size(-1)), "reduce_from_parallel", [&] {
    return fmt::format("bias {} does not match the last dimension of {}", bias.shape().str(), partial.shape().str());
  });
  const std::int64_t c = partial.size(-1), rows = partial.numel() / c;
  // At partial's last use the sum is taken in its memory (an in-place all-reduce), else in a copy.
  Tensor y = takeOverAtLastUse(partial, {&partial, &bias});
  if (!y.defined()) {
    y = like(partial, partial.shape());
    if (computes(y)) std::copy_n(partial.data(), partial.numel(), y.data());
  }
  group.allreduce(y.data(), static_cast<std::size_t>(y.numel()), wireOf(y), ParallelReduce::kSum);
  if (bias.defined()) addBias(y, bias);
  recordUnrecordedBackward("reduce_from_parallel", y, {&partial, &bias},
                           [partial = GradRef(partial), bias = GradRef(bias), y = GradRef(y), rows] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    if (wants(partial)) accumulateGrad(partial, gy.data());
    if (wants(bias)) accumulateRowSum(bias, gy.data(), rows);
  });
  return finish(y);
}

Tensor gatherFromParallel(const Tensor& x, ParallelGroup& group) {
  const std::int64_t c = x.size(-1), rows = x.numel() / c, parts = group.size();
  std::vector<std::int64_t> dims(x.shape().dims().begin(), x.shape().dims().end());
  dims.back() = c * parts;
  Tensor y = like(x, Shape(std::span<const std::int64_t>(dims)));
  std::vector<float> gathered(computes(x) ? static_cast<std::size_t>(y.numel()) : 0);
  group.allgather(x.data(), static_cast<std::size_t>(x.numel()), wireOf(x), computes(x) ? gathered.data() : nullptr);
  if (computes(y))
    for (std::int64_t k = 0; k < parts; ++k)
      for (std::int64_t r = 0; r < rows; ++r)
        std::copy_n(gathered.data() + (k * rows + r) * c, c, y.data() + r * c * parts + k * c);
  const int rank = group.rank();
  recordUnrecordedBackward("gather_from_parallel", y, {&x}, [x = GradRef(x), y = GradRef(y), rows, c, parts, rank] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    if (!computes(gy)) return accumulateGrad(x, nullptr);
    std::vector<float> mine(static_cast<std::size_t>(x.numel()));
    for (std::int64_t r = 0; r < rows; ++r) std::copy_n(gy.data() + r * c * parts + rank * c, c, mine.data() + r * c);
    accumulateGrad(x, mine.data());
  });
  return finish(y);
}

Tensor vocabParallelCrossEntropy(const Tensor& logits_in, const Tensor& labels, std::int64_t start, std::int64_t vocab,
                                 ParallelGroup& group, const CrossEntropyOptions& o) {
  require(logits_in.ndim() >= 2 && labels.dtype() == DType::kInt64 &&
              labels.numel() * logits_in.size(-1) == logits_in.numel(),
          op::kCrossEntropy, [&] {
            return fmt::format("expects logits [..., C] and int64 labels [...] (one per row), got {} and {}",
                               logits_in.shape().str(), labels.shape().str());
          });
  require(o.label_smoothing == 0.0f, op::kCrossEntropy,
          "label smoothing is not supported with the vocabulary split across tensor-parallel ranks");
  const Tensor logits = castTo(logits_in, computeDtype(op::kCrossEntropy, {&logits_in}));
  const OpRecord op_record = record(op::kCrossEntropy, {&logits, &labels});
  const std::int64_t c = logits.size(-1), n = logits.numel() / c;
  // This rank's classes: its columns before the vocabulary's padding.
  const std::int64_t classes = std::clamp(vocab - start, std::int64_t{0}, c);
  Tensor lse = Tensor::empty(logits.device(), {n});  // one log-sum-exp per row, for backward
  auto counted = std::make_shared<std::int64_t>(0);
  const bool real = computes(logits);
  const auto rows = static_cast<std::size_t>(real ? n : 0);
  std::vector<float> max(rows, -std::numeric_limits<float>::infinity()), sum(rows, 0.0f), target(rows, 0.0f);
  const auto each = [&](std::vector<float>& v, ParallelReduce op) {
    group.allreduce(real ? v.data() : nullptr, static_cast<std::size_t>(n), DType::kFloat32, op);
  };
  const float* l = logits.data();
  const std::int64_t* y = labels.labels();
  if (real)
    for (std::int64_t r = 0; r < n; ++r) {
      if (y[r] != o.ignore_index && (y[r] < 0 || y[r] >= vocab))
        throw Error(fmt::format("cross_entropy: label {} of sample {} is outside the {} classes", y[r], r, vocab));
      if (classes > 0) max[r] = *std::max_element(l + r * c, l + r * c + classes);
    }
  each(max, ParallelReduce::kMax);
  if (real)
    for (std::int64_t r = 0; r < n; ++r) {
      double s = 0;
      for (std::int64_t j = 0; j < classes; ++j) s += std::exp(static_cast<double>(l[r * c + j]) - max[r]);
      sum[r] = static_cast<float>(s);
      const std::int64_t mine = y[r] - start;
      if (mine >= 0 && mine < classes) target[r] = l[r * c + mine];
    }
  each(sum, ParallelReduce::kSum);
  each(target, ParallelReduce::kSum);
  double total = 0;
  if (real)
    for (std::int64_t r = 0; r < n; ++r) {
      lse.data()[r] = max[r] + std::log(sum[r]);
      if (y[r] == o.ignore_index) continue;
      total += static_cast<double>(lse.data()[r]) - target[r];
      ++*counted;
    }
  Tensor loss = scalar(logits.device(), real ? total / static_cast<double>(*counted) : 0.0);  // none counted: nan
  recordBackward(loss, {&logits}, [logits, labels, loss = GradRef(loss), lse, n, c, classes, start, o, counted] {
    Tensor gl = loss.grad();
    if (!gl.defined()) return;
    GradTarget g = gradTarget(logits);
    if (g.data != nullptr) {
      const float scale = gl.item() / static_cast<float>(*counted);
      const float* x = logits.data();
      const std::int64_t* y = labels.labels();
      for (std::int64_t r = 0; r < n; ++r) {
        const bool ignored = y[r] == o.ignore_index;
        for (std::int64_t j = 0; j < c; ++j) {
          float d = 0.0f;
          if (!ignored && j < classes)
            d = (std::exp(x[r * c + j] - lse.data()[r]) - (y[r] - start == j ? 1.0f : 0.0f)) * scale;
          g.data[r * c + j] = g.accumulate ? g.data[r * c + j] + d : d;
        }
      }
    }
    gradWritten(logits);
  });
  return loss;
}


// ---------------------------------------------------------------- sequence parallelism

namespace {

thread_local bool tls_sequence_parallel = false;

// x [B, T, C...] as [B, T, C] with C the product of the rest.
struct SequenceDims {
  std::int64_t batch, positions, row;
};
SequenceDims dimsOf(const Tensor& x) {
  require(x.ndim() >= 2, "sequence_parallel", [&] { return "expects [batch, positions, ...], got " + x.shape().str(); });
  return {x.size(0), x.size(1), x.numel() / (x.size(0) * x.size(1))};
}

// [B, p x T, C] from every rank's [B, T, C] (`local`, this rank's), and the
// reverse: rank-major blocks [p][B][T][C] <-> [B][p x T][C].
void rankBlocksToSequence(const float* blocks, const SequenceDims& d, int parts, float* whole) {
  for (int r = 0; r < parts; ++r)
    for (std::int64_t b = 0; b < d.batch; ++b)
      std::copy_n(blocks + ((r * d.batch + b) * d.positions) * d.row, d.positions * d.row,
                  whole + ((b * parts + r) * d.positions) * d.row);
}
void sequenceToRankBlocks(const float* whole, const SequenceDims& d, int parts, float* blocks) {
  for (int r = 0; r < parts; ++r)
    for (std::int64_t b = 0; b < d.batch; ++b)
      std::copy_n(whole + ((b * parts + r) * d.positions) * d.row, d.positions * d.row,
                  blocks + ((r * d.batch + b) * d.positions) * d.row);
}

// Every rank's positions [B, T, C] -> the whole sequence [B, p x T, C].
std::vector<float> allgatherSequence(const float* local, const SequenceDims& d, DType wire, ParallelGroup& group) {
  const auto count = static_cast<std::size_t>(d.batch * d.positions * d.row);
  const bool real = local != nullptr;
  std::vector<float> blocks(real ? count * static_cast<std::size_t>(group.size()) : 0), whole(blocks.size());
  group.allgather(local, count, wire, real ? blocks.data() : nullptr);
  if (real) rankBlocksToSequence(blocks.data(), d, group.size(), whole.data());
  return whole;
}

// The sum over the group of whole [B, p x T, C] -> this rank's positions
// [B, T, C] (`d`: the local dimensions).
std::vector<float> reduceScatterSequence(const float* whole, const SequenceDims& d, DType wire, ParallelGroup& group) {
  const auto count = static_cast<std::size_t>(d.batch * d.positions * d.row);
  const bool real = whole != nullptr;
  std::vector<float> blocks(real ? count * static_cast<std::size_t>(group.size()) : 0), mine(real ? count : 0);
  if (real) sequenceToRankBlocks(whole, d, group.size(), blocks.data());
  group.reduceScatter(real ? blocks.data() : nullptr, count, wire, real ? mine.data() : nullptr);
  return mine;
}

Shape withPositions(const Tensor& x, std::int64_t positions) {
  std::vector<std::int64_t> dims(x.shape().dims().begin(), x.shape().dims().end());
  dims[1] = positions;
  return Shape(std::span<const std::int64_t>(dims));
}

}  // namespace

SequenceParallelScope::SequenceParallelScope(bool on) : previous_(tls_sequence_parallel) { tls_sequence_parallel = on; }
SequenceParallelScope::~SequenceParallelScope() { tls_sequence_parallel = previous_; }
bool sequenceParallel() { return tls_sequence_parallel; }

Tensor toParallelRegion(const Tensor& x, ParallelGroup& group) {
  if (!sequenceParallel()) return copyToParallel(x, group);
  const SequenceDims d = dimsOf(x);
  Tensor y = like(x, withPositions(x, d.positions * group.size()));
  const std::vector<float> whole = allgatherSequence(x.data(), d, wireOf(x), group);
  if (computes(y)) std::copy(whole.begin(), whole.end(), y.data());
  recordUnrecordedBackward("to_parallel_region", y, {&x}, [x = GradRef(x), y = GradRef(y), d, &group] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    const std::vector<float> mine = reduceScatterSequence(gy.data(), d, wireOf(gy), group);
    accumulateGrad(x, mine.empty() ? nullptr : mine.data());
  });
  return finish(y);
}

Tensor fromParallelRegion(Tensor partial, ParallelGroup& group, const Tensor& bias) {
  if (!sequenceParallel()) return reduceFromParallel(std::move(partial), group, bias);
  const SequenceDims whole_dims = dimsOf(partial);
  const std::int64_t positions = whole_dims.positions / group.size();
  const SequenceDims d{whole_dims.batch, positions, whole_dims.row};
  Tensor y = like(partial, withPositions(partial, positions));
  const std::vector<float> mine = reduceScatterSequence(partial.data(), d, wireOf(partial), group);
  if (computes(y)) std::copy(mine.begin(), mine.end(), y.data());
  const std::int64_t c = partial.size(-1), rows = y.numel() / c;
  if (bias.defined()) addBias(y, bias);
  recordUnrecordedBackward("from_parallel_region", y, {&partial, &bias},
                           [partial = GradRef(partial), bias = GradRef(bias), y = GradRef(y), d, rows, &group] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    if (wants(partial)) {
      const std::vector<float> whole = allgatherSequence(gy.data(), d, wireOf(gy), group);
      accumulateGrad(partial, whole.empty() ? nullptr : whole.data());
    }
    // The bias's gradient over this rank's positions, summed over the group: all of them.
    if (wants(bias)) {
      std::vector<float> sums(static_cast<std::size_t>(bias.numel()), 0.0f);
      if (computes(gy))
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t j = 0; j < bias.numel(); ++j) sums[static_cast<std::size_t>(j)] += gy.data()[r * bias.numel() + j];
      group.allreduce(computes(gy) ? sums.data() : nullptr, sums.size(), DType::kFloat32, ParallelReduce::kSum);
      accumulateRowSum(bias, computes(gy) ? sums.data() : nullptr, 1);
    }
  });
  return finish(y);
}

Tensor scatterToSequence(const Tensor& x, ParallelGroup& group) {
  if (!sequenceParallel()) return x;
  const SequenceDims whole = dimsOf(x);
  if (whole.positions % group.size() != 0)
    throw UsageError(fmt::format("sequence parallelism splits the {} positions of a sequence across {} tensor-parallel "
                                 "ranks: choose a sequence length (data block_size) that they divide",
                                 whole.positions, group.size()));
  const std::int64_t positions = whole.positions / group.size(), first = positions * group.rank();
  const SequenceDims d{whole.batch, positions, whole.row};
  Tensor y = like(x, withPositions(x, positions));
  if (computes(y))
    for (std::int64_t b = 0; b < d.batch; ++b)
      std::copy_n(x.data() + (b * whole.positions + first) * d.row, positions * d.row, y.data() + b * positions * d.row);
  recordUnrecordedBackward("scatter_to_sequence", y, {&x}, [x = GradRef(x), y = GradRef(y), d, &group] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    const std::vector<float> all = allgatherSequence(gy.data(), d, wireOf(gy), group);
    accumulateGrad(x, all.empty() ? nullptr : all.data());
  });
  return finish(y);
}

Tensor sequenceParallelParameter(const Tensor& p, ParallelGroup& group) {
  return sequenceParallel() ? copyToParallel(p, group) : p;
}

SequencePart sequencePartOf(const Tensor& x, ParallelGroup& group) {
  if (!sequenceParallel()) return {};
  return {x.size(1) * group.rank(), x.size(1) * group.size()};
}

}  // namespace hpu::core::ops
