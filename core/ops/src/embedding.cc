// Embedding lookup: of a whole table, or of a tensor-parallel rank's rows.
#include <optional>
#include <vector>

#include "hpu/core/ops/ops.h"
#include "hpu/core/ops/parallel.h"
#include "op_support.h"

namespace hpu::core::ops {

using namespace detail;

Tensor vocabShardEmbedding(const Tensor& indices, const Tensor& w_in, std::int64_t start, std::int64_t vocab,
                           std::optional<std::int64_t> padding_idx) {
  require(indices.dtype() == DType::kInt64 && w_in.ndim() == 2, op::kEmbedding,
          "expects int64 indices and a [num, dim] weight");
  const Tensor w = castTo(w_in, computeDtype(op::kEmbedding, {&w_in}));
  const OpRecord op_record = record(op::kEmbedding, {&indices, &w});
  const std::int64_t num = w.size(0), dim = w.size(1), n = indices.numel();
  std::vector<std::int64_t> dims(indices.shape().dims().begin(), indices.shape().dims().end());
  dims.push_back(dim);
  Tensor y = like(w, Shape(std::span<const std::int64_t>(dims)));
  if (computes(y))
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t id = indices.labels()[i];
      if (id < 0 || id >= vocab) throw Error(fmt::format("embedding: index {} out of range for {} embeddings", id, vocab));
      const std::int64_t row = id - start;
      if (row >= 0 && row < num)
        std::copy(w.data() + row * dim, w.data() + (row + 1) * dim, y.data() + i * dim);
      else
        std::fill_n(y.data() + i * dim, dim, 0.0f);
    }
  recordBackward(y, {&w}, [indices, w = GradRef(w), y = GradRef(y), n, num, dim, start, padding_idx] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget g = gradTarget(w);
    if (g.data != nullptr) {
      if (!g.accumulate) std::fill(g.data, g.data + w.numel(), 0.0f);
      const std::int64_t* ids = indices.labels();
      const float* dy = gy.data();
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t row = ids[i] - start;
        if (ids[i] == padding_idx || row < 0 || row >= num) continue;
        for (std::int64_t j = 0; j < dim; ++j) g.data[row * dim + j] += dy[i * dim + j];
      }
    }
    gradWritten(w);
  });
  return finish(y);
}

Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<std::int64_t> padding_idx) {
  return vocabShardEmbedding(indices, weight, 0, weight.ndim() == 2 ? weight.size(0) : 0, padding_idx);
}

}  // namespace hpu::core::ops
