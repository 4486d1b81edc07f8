// Mixture of experts: the router's top-k choice, the rows each expert reads,
// the weighted sum of their outputs, and the load-balancing loss's gradient
// (withRowGradient, addScalarTerm).
#include <algorithm>
#include <numeric>
#include <vector>

#include "hpu/core/ops/ops.h"
#include "op_support.h"

namespace hpu::core::ops {

using namespace detail;

TopKRouting routerTopK(const Tensor& probs_in, std::int64_t k, bool normalize) {
  require(probs_in.ndim() == 2 && k >= 1 && k <= probs_in.size(1), op::kRouterTopK, [&] {
    return fmt::format("expects probabilities [tokens, experts] and 1 <= k <= experts; got {} and k {}",
                       probs_in.shape().str(), k);
  });
  const Tensor probs = castTo(probs_in, computeDtype(op::kRouterTopK, {&probs_in}));
  const std::int64_t n = probs.size(0), experts = probs.size(1);
  const OpRecord op_record = record(op::kRouterTopK, {&probs});
  TopKRouting out;
  out.weights = like(probs, {n, k});
  out.experts.resize(static_cast<std::size_t>(n * k));
  std::vector<float> sums(static_cast<std::size_t>(n), 1.0f);  // of each row's chosen probabilities
  if (!computes(out.weights)) {
    for (std::int64_t i = 0; i < n * k; ++i) out.experts[static_cast<std::size_t>(i)] = i % experts;
  } else {
    std::vector<std::int64_t> order(static_cast<std::size_t>(experts));
    for (std::int64_t r = 0; r < n; ++r) {
      const float* p = probs.data() + r * experts;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [p](std::int64_t a, std::int64_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
      float sum = 0.0f;
      for (std::int64_t j = 0; j < k; ++j) sum += p[order[static_cast<std::size_t>(j)]];
      if (normalize) sums[static_cast<std::size_t>(r)] = sum;
      for (std::int64_t j = 0; j < k; ++j) {
        const std::int64_t e = order[static_cast<std::size_t>(j)];
        out.experts[static_cast<std::size_t>(r * k + j)] = e;
        out.weights.data()[r * k + j] = normalize ? p[e] / sum : p[e];
      }
    }
  }
  recordBackward(out.weights, {&probs},
                 [probs = GradRef(probs), weights = out.weights, experts_of = out.experts, sums, n, k, experts,
                  normalize] {
                   Tensor gw = weights.grad();
                   if (!gw.defined()) return;
                   GradTarget g = gradTarget(probs);
                   if (g.data != nullptr) {
                     if (!g.accumulate) std::fill(g.data, g.data + n * experts, 0.0f);
                     for (std::int64_t r = 0; r < n; ++r) {
                       const float* w = weights.data() + r * k;
                       const float* dw = gw.data() + r * k;
                       // w_j = p_j / S over the chosen experts: dp_j = (dw_j - sum_i dw_i w_i) / S.
                       float dot = 0.0f;
                       if (normalize)
                         for (std::int64_t j = 0; j < k; ++j) dot += dw[j] * w[j];
                       for (std::int64_t j = 0; j < k; ++j) {
                         const std::int64_t e = experts_of[static_cast<std::size_t>(r * k + j)];
                         g.data[r * experts + e] += (dw[j] - dot) / sums[static_cast<std::size_t>(r)];
                       }
                     }
                   }
                   gradWritten(probs);
                 });
  out.weights = finish(out.weights);
  return out;
}

std::vector<Tensor> dispatchRows(const Tensor& x_in, std::span<const std::vector<std::int64_t>> rows) {
  require(x_in.ndim() == 2, op::kDispatchRows, [&] { return fmt::format("expects rows [N, H]; got {}", x_in.shape().str()); });
  const Tensor x = castTo(x_in, computeDtype(op::kDispatchRows, {&x_in}));
  const std::int64_t n = x.size(0), h = x.size(1);
  for (const auto& r : rows)
    for (std::int64_t i : r)
      require(i >= 0 && i < n, op::kDispatchRows, [&] { return fmt::format("row {} of {}", i, n); });
  // Recorded as reading x and writing every expert's rows ([rows of all, H]).
  std::int64_t total = 0;
  for (const auto& r : rows) total += static_cast<std::int64_t>(r.size());
  const std::int64_t all_rows[] = {total, h};
  const device::OperandInfo operands[] = {operandInfo(x), {all_rows, x.dtype(), false}};
  const OpRecord op_record = record(op::kDispatchRows, x.device(), operands);
  std::vector<Tensor> out;
  for (const auto& r : rows) {
    Tensor y = like(x, {static_cast<std::int64_t>(r.size()), h});
    if (computes(y))
      for (std::size_t i = 0; i < r.size(); ++i) std::copy_n(x.data() + r[i] * h, h, y.data() + static_cast<std::int64_t>(i) * h);
    recordBackward(y, {&x}, [x = GradRef(x), y = GradRef(y), r, n, h] {
      Tensor gy = y.grad();
      if (!gy.defined()) return;
      // Each expert's rows add into x's gradient; the first backward claims it.
      GradTarget g = gradTarget(x);
      if (g.data != nullptr) {
        if (!g.accumulate) std::fill(g.data, g.data + n * h, 0.0f);
        for (std::size_t i = 0; i < r.size(); ++i) {
          const float* src = gy.data() + static_cast<std::int64_t>(i) * h;
          float* dst = g.data + r[i] * h;
          for (std::int64_t j = 0; j < h; ++j) dst[j] += src[j];
        }
      }
      gradWritten(x);
    });
    out.push_back(finish(y));
  }
  return out;
}

Tensor combineRows(std::span<const Tensor> ys_in, std::span<const std::vector<std::int64_t>> rows,
                   std::span<const std::vector<std::int64_t>> slots, const Tensor& weights_in, std::int64_t n) {
  require(ys_in.size() == rows.size() && rows.size() == slots.size() && weights_in.ndim() == 2, op::kCombineRows,
          "expects one output, row list and slot list per expert and weights [N, k]");
  std::vector<const Tensor*> given{&weights_in};
  for (const Tensor& y : ys_in) given.push_back(&y);
  const DType dt = computeDtype(op::kCombineRows, given);
  std::vector<Tensor> ys;
  for (const Tensor& y : ys_in) ys.push_back(castTo(y, dt));
  const Tensor weights = castTo(weights_in, DType::kFloat32);
  const std::int64_t h = ys.empty() ? 0 : ys.front().size(-1), slots_total = weights.numel();
  for (std::size_t e = 0; e < ys.size(); ++e) {
    require(ys[e].ndim() == 2 && ys[e].size(0) == static_cast<std::int64_t>(rows[e].size()) &&
                rows[e].size() == slots[e].size() && ys[e].size(1) == h,
            op::kCombineRows, [&] { return fmt::format("expert {}: output {} for {} rows", e, ys[e].shape().str(), rows[e].size()); });
    for (std::size_t i = 0; i < rows[e].size(); ++i)
      require(rows[e][i] >= 0 && rows[e][i] < n && slots[e][i] >= 0 && slots[e][i] < slots_total, op::kCombineRows,
              [&] { return fmt::format("expert {}: row {} / slot {} out of range", e, rows[e][i], slots[e][i]); });
  }
  std::vector<const Tensor*> inputs{&weights};
  for (const Tensor& y : ys) inputs.push_back(&y);
  // Recorded as reading the weights and every expert's rows, writing [n, H].
  std::int64_t total = 0;
  for (const auto& r : rows) total += static_cast<std::int64_t>(r.size());
  const std::int64_t all_rows[] = {total, h}, out_shape[] = {n, h};
  const bool rows_grad = std::any_of(ys.begin(), ys.end(), [](const Tensor& y) { return y.requiresGrad(); });
  const device::OperandInfo operands[] = {operandInfo(weights), {all_rows, dt, rows_grad}, {out_shape, dt, false}};
  const OpRecord op_record = record(op::kCombineRows, weights.device(), operands);
  Tensor out = Tensor::empty(weights.device(), {n, h}, dt);
  if (computes(out)) {
    std::fill_n(out.data(), n * h, 0.0f);
    for (std::size_t e = 0; e < ys.size(); ++e)
      for (std::size_t i = 0; i < rows[e].size(); ++i) {
        const float w = weights.data()[slots[e][i]];
        const float* y = ys[e].data() + static_cast<std::int64_t>(i) * h;
        float* dst = out.data() + rows[e][i] * h;
        for (std::int64_t j = 0; j < h; ++j) dst[j] += w * y[j];
      }
  }
  std::vector<std::vector<std::int64_t>> row_lists(rows.begin(), rows.end()), slot_lists(slots.begin(), slots.end());
  recordBackward(out, inputs, [ys, weights, out = GradRef(out), row_lists, slot_lists, h] {
    Tensor gout = out.grad();
    if (!gout.defined()) return;
    const bool values = computes(out);
    for (std::size_t e = 0; e < ys.size(); ++e) {
      if (!wants(ys[e])) continue;
      GradTarget g = gradTarget(ys[e]);
      if (g.data != nullptr && values)
        for (std::size_t i = 0; i < row_lists[e].size(); ++i) {
          const float w = weights.data()[slot_lists[e][i]];
          const float* src = gout.data() + row_lists[e][i] * h;
          float* dst = g.data + static_cast<std::int64_t>(i) * h;
          for (std::int64_t j = 0; j < h; ++j) dst[j] = g.accumulate ? dst[j] + w * src[j] : w * src[j];
        }
      gradWritten(ys[e]);
    }
    if (!wants(weights)) return;
    GradTarget g = gradTarget(weights);
    if (g.data != nullptr && values) {
      if (!g.accumulate) std::fill_n(g.data, weights.numel(), 0.0f);
      for (std::size_t e = 0; e < ys.size(); ++e)
        for (std::size_t i = 0; i < row_lists[e].size(); ++i) {
          const float* src = gout.data() + row_lists[e][i] * h;
          const float* y = ys[e].data() + static_cast<std::int64_t>(i) * h;
          float dot = 0.0f;
          for (std::int64_t j = 0; j < h; ++j) dot += src[j] * y[j];
          g.data[slot_lists[e][i]] += dot;
        }
    }
    gradWritten(weights);
  });
  return finish(out);
}

Tensor withRowGradient(const Tensor& x, std::shared_ptr<const std::vector<float>> row_gradient) {
  require(row_gradient != nullptr && x.ndim() >= 1 && static_cast<std::int64_t>(row_gradient->size()) == x.size(-1),
          "with_row_gradient", [&] { return fmt::format("a row gradient for the last dimension of {}", x.shape().str()); });
  Tensor y = x.reshaped(x.shape());
  recordUnrecordedBackward("with_row_gradient", y, {&x}, [x = GradRef(x), y = GradRef(y), row_gradient] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget g = gradTarget(x);
    if (g.data != nullptr) {
      const auto c = static_cast<std::int64_t>(row_gradient->size());
      const float* add = row_gradient->data();
      for (std::int64_t i = 0; i < x.numel(); ++i) {
        const float d = gy.data()[i] + add[i % c];
        g.data[i] = g.accumulate ? g.data[i] + d : d;
      }
    }
    gradWritten(x);
  });
  return y;
}

Tensor addScalarTerm(const Tensor& loss, double value, std::function<void(float)> on_gradient) {
  require(loss.numel() == 1, "add_scalar_term", [&] { return fmt::format("expects a scalar loss; got {}", loss.shape().str()); });
  Tensor y = like(loss, loss.shape());
  if (computes(y)) y.data()[0] = static_cast<float>(static_cast<double>(loss.data()[0]) + value);
  recordUnrecordedBackward("add_scalar_term", y, {&loss},
                           [loss = GradRef(loss), y = GradRef(y), on_gradient = std::move(on_gradient)] {
                             Tensor gy = y.grad();
                             if (!gy.defined()) return;
                             if (computes(y)) on_gradient(gy.data()[0]);
                             accumulateGrad(loss, gy.data());
                           });
  return finish(y);
}

}  // namespace hpu::core::ops
