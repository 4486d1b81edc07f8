// Embedding lookup.
#include <optional>
#include <vector>

#include "hpu/core/ops/ops.h"
#include "op_support.h"

namespace hpu::core::ops {

using namespace detail;

Tensor embedding(const Tensor& indices, const Tensor& w_in, std::optional<std::int64_t> padding_idx) {
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
      const std::int64_t row = indices.labels()[i];
      if (row < 0 || row >= num)
        throw Error(fmt::format("embedding: index {} out of range for {} embeddings", row, num));
      std::copy(w.data() + row * dim, w.data() + (row + 1) * dim, y.data() + i * dim);
    }
  recordBackward(y, {&w}, [indices, w, y, n, dim, padding_idx] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget g = gradTarget(w);
    if (g.data != nullptr) {
      if (!g.accumulate) std::fill(g.data, g.data + w.numel(), 0.0f);
      const std::int64_t* rows = indices.labels();
      const float* dy = gy.data();
      for (std::int64_t i = 0; i < n; ++i) {
        if (rows[i] == padding_idx) continue;  // the padding row learns nothing
        for (std::int64_t j = 0; j < dim; ++j) g.data[rows[i] * dim + j] += dy[i * dim + j];
      }
    }
    gradWritten(w);
  });
  return finish(y);
}

}  // namespace hpu::core::ops
