// Products: linear, batched matmul, conv2d.
#include <array>
#include <memory>
#include <span>
#include <vector>

#include "hpu/core/ops/ops.h"
#include "hpu/device/kernels/activation.h"
#include "hpu/device/kernels/conv.h"
#include "hpu/device/kernels/gemm.h"
#include "op_support.h"

namespace hpu::core::ops {

using namespace detail;
namespace k = device::kernels;

namespace {

// linear, and with relu its fused ReLU and dropout (linearRelu).
Tensor linearOp(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, const LinearOptions& o, bool relu,
                std::optional<FusedDropout> dropout) {
  const bool in_out = o.weight_in_out;
  require(x_in.ndim() >= 1 && w_in.ndim() == 2 && x_in.size(-1) == w_in.size(in_out ? 0 : 1), op::kLinear,
          [&] { return fmt::format("input {} does not match weight {}", x_in.shape().str(), w_in.shape().str()); });
  const DType dt = computeDtype(op::kLinear, {&x_in, &w_in, &b_in});
  if (dropout && (!dropout->training || dropout->p == 0.0f)) dropout.reset();  // the identity, unrecorded
  // Half types round the ReLU's output before the dropout scales it.
  if (dropout && dt != DType::kFloat32)
    return ops::dropout(linearOp(x_in, w_in, b_in, o, relu, std::nullopt), dropout->p, true, *dropout->rng);
  const Tensor x = castTo(x_in, dt), w = castTo(w_in, dt), b = castTo(b_in, dt);
  const std::int64_t in = w.size(in_out ? 0 : 1), out = w.size(in_out ? 1 : 0), n = x.numel() / in;
  Shape ys = x.shape();
  ys[-1] = out;
  Tensor y = like(x, ys);
  // The dropout mask: host memory, as the dropout op keeps it.
  std::shared_ptr<float[]> mask;
  {
    const OpRecord op_record = record(op::kLinear, {&x, &w, &b});
    if (computes(y)) {
      k::gemm(false, !in_out, n, out, in, x.data(), w.data(), 0.0f, y.data(), gemmOperands({x.dtype(), w.dtype()}),
              {b.defined() ? b.data() : nullptr, relu});
      if (dropout) {  // in place, with the dropout op's one draw per call
        mask.reset(new float[static_cast<std::size_t>(y.numel())]);
        k::dropoutForward(dropout->rng->next(), dropout->p, y.data(), y.data(), mask.get(), y.numel());
      }
    }
    // The ReLU's backward reads its output (kept then), the products their operands.
    const Tensor y_saved = relu ? y : Tensor();
    recordBackward(y, {&x, &w, &b}, [x, w, b = GradRef(b), y = GradRef(y), y_saved, n, in, out, in_out, relu, mask] {
      Tensor gy = y.grad();
      if (!gy.defined()) return;
      if (relu) {  // the gradient before the ReLU (and dropout), once for the three products
        Tensor gz = like(gy, gy.shape());
        if (computes(y) && mask)
          k::reluDropoutBackward(mask.get(), y_saved.data(), gy.data(), gz.data(), gy.numel());
        else if (computes(y))
          k::activationBackward(k::Activation::kReLU, nullptr, y_saved.data(), gy.data(), gz.data(), gy.numel(),
                                false);
        gy = gz;
      }
      if (w.requiresGrad()) {
        const k::GemmOperands ops = gemmOperands({gy.dtype(), x.dtype()});
        if (in_out)
          gemmGrad(w, true, false, in, out, n, x.data(), gy.data(), ops);  // dW [in, out] = x^T dy
        else
          gemmGrad(w, true, false, out, in, n, gy.data(), x.data(), ops);  // dW [out, in] = dy^T x
      }
      if (wants(b)) {
        GradTarget g = gradTarget(b);
        if (g.data != nullptr) k::columnSums(gy.data(), n, out, g.data, g.accumulate);
        gradWritten(b);
      }
      if (x.requiresGrad())
        gemmGrad(x, false, in_out, n, in, out, gy.data(), w.data(), gemmOperands({gy.dtype(), w.dtype()}));
    });
  }
  if (relu) {
    const OpRecord relu_record = record(op::kRelu, {&y});
  }
  if (dropout) {
    const OpRecord dropout_record = record(op::kDropout, {&y});
  }
  return finish(y);
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b, const LinearOptions& o) {
  return linearOp(x, w, b, o, false, std::nullopt);
}

Tensor linearRelu(const Tensor& x, const Tensor& w, const Tensor& b, const LinearOptions& o,
                  std::optional<FusedDropout> dropout) {
  return linearOp(x, w, b, o, true, dropout);
}

namespace {

// The batch structure of a matmul: the broadcast batch dims, and for every
// output matrix the index of the A and B matrices it reads.
struct MatmulBatch {
  std::vector<std::int64_t> dims;
  std::vector<std::int64_t> a_item, b_item;
  std::int64_t a_items = 1, b_items = 1;
};

MatmulBatch broadcastBatch(const Shape& a, const Shape& b) {
  const int na = a.ndim() - 2, nb = b.ndim() - 2, n = std::max(na, nb);
  MatmulBatch out;
  std::vector<std::int64_t> da(static_cast<std::size_t>(n), 1), db(static_cast<std::size_t>(n), 1);
  for (int i = 0; i < na; ++i) da[static_cast<std::size_t>(n - na + i)] = a[i];
  for (int i = 0; i < nb; ++i) db[static_cast<std::size_t>(n - nb + i)] = b[i];
  for (int i = 0; i < n; ++i) {
    const auto d = static_cast<std::size_t>(i);
    require(da[d] == db[d] || da[d] == 1 || db[d] == 1, op::kMatmul,
            [&] { return fmt::format("batch dimensions of {} and {} do not broadcast", a.str(), b.str()); });
    out.dims.push_back(std::max(da[d], db[d]));
    out.a_items *= da[d];
    out.b_items *= db[d];
  }
  std::int64_t items = 1;
  for (std::int64_t d : out.dims) items *= d;
  std::vector<std::int64_t> coord(static_cast<std::size_t>(n), 0);
  for (std::int64_t i = 0; i < items; ++i) {
    std::int64_t ai = 0, bi = 0;
    for (int d = 0; d < n; ++d) {
      const auto u = static_cast<std::size_t>(d);
      ai = ai * da[u] + (da[u] == 1 ? 0 : coord[u]);
      bi = bi * db[u] + (db[u] == 1 ? 0 : coord[u]);
    }
    out.a_item.push_back(ai);
    out.b_item.push_back(bi);
    for (int d = n - 1; d >= 0; --d) {
      const auto u = static_cast<std::size_t>(d);
      if (++coord[u] < out.dims[u]) break;
      coord[u] = 0;
    }
  }
  return out;
}

// target's gradient, item by item: item i (+)= product(i). Items that share a
// target matrix (a broadcast operand) add up; the first write of each obeys
// the gradient's accumulate flag.
template <class Product>
void gradPerItem(const Tensor& target, const std::vector<std::int64_t>& target_item, std::int64_t items,
                 std::int64_t matrix, Product product) {
  GradTarget g = gradTarget(target);
  if (g.data != nullptr) {
    std::vector<bool> written(static_cast<std::size_t>(items), g.accumulate);
    for (std::size_t i = 0; i < target_item.size(); ++i) {
      const auto t = static_cast<std::size_t>(target_item[i]);
      product(i, g.data + target_item[i] * matrix, written[t] ? 1.0f : 0.0f);
      written[t] = true;
    }
  }
  gradWritten(target);
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in, const MatmulOptions& o) {
  const bool ta = o.transpose_a, tb = o.transpose_b;
  require(a_in.ndim() >= 2 && b_in.ndim() >= 2, op::kMatmul, [&] {
    return fmt::format("expects matrices (2 or more dimensions), got {} and {}", a_in.shape().str(),
                       b_in.shape().str());
  });
  const std::int64_t b_rows = o.b_rows < 0 ? b_in.size(-2) : o.b_rows;
  require(b_rows <= b_in.size(-2) && (b_rows == b_in.size(-2) || !b_in.requiresGrad()), op::kMatmul, [&] {
    return fmt::format("b_rows {} of {}: at most its rows, and without its gradient", b_rows, b_in.shape().str());
  });
  // B's matrices as read ([..., b_rows, cols]); each is b_matrix apart.
  const std::int64_t b_matrix = b_in.size(-2) * b_in.size(-1);
  const std::int64_t m = a_in.size(ta ? -1 : -2), kk = a_in.size(ta ? -2 : -1);
  const std::int64_t n = tb ? b_rows : b_in.size(-1), kb = tb ? b_in.size(-1) : b_rows;
  require(kk == kb, op::kMatmul, [&] {
    return fmt::format("shapes {} and {} do not chain{}", a_in.shape().str(), b_in.shape().str(),
                       ta || tb ? fmt::format(" (transpose_a={}, transpose_b={})", ta, tb) : "");
  });
  const MatmulBatch batch = broadcastBatch(a_in.shape(), b_in.shape());
  // An fp8 B beside a wider A (an fp8 KV cache in eager attention) is read as
  // stored, as fp8 quantization's matmul reads it: no widened copy.
  const bool fp8_b = device::isFp8(b_in.dtype()) && !device::isFp8(a_in.dtype());
  const DType dt = fp8_b ? computeDtype(op::kMatmul, {&a_in}) : computeDtype(op::kMatmul, {&a_in, &b_in});
  const Tensor a = castTo(a_in, dt), b = fp8_b ? b_in : castTo(b_in, dt);
  // B is recorded as the rows the product reads.
  std::vector<std::int64_t> b_read(b.shape().dims().begin(), b.shape().dims().end());
  b_read[b_read.size() - 2] = b_rows;
  const device::OperandInfo operands[] = {operandInfo(a), {b_read, b.dtype(), b.requiresGrad()}};
  const OpRecord op_record = record(op::kMatmul, a.device(), operands);
  std::vector<std::int64_t> ys = batch.dims;
  ys.push_back(m);
  ys.push_back(n);
  Tensor y = like(a, Shape(std::span<const std::int64_t>(ys)));
  const auto items = static_cast<std::int64_t>(batch.a_item.size());
  // B shared by every item and A not transposed: one GEMM over all A's rows.
  const bool fold = batch.b_items == 1 && !ta && b_rows == b.size(-2);
  if (computes(y)) {
    const k::GemmOperands ops = gemmOperands({a.dtype(), b.dtype()});
    if (fold) {
      k::gemm(false, tb, items * m, n, kk, a.data(), b.data(), 0.0f, y.data(), ops);
    } else {
      for (std::int64_t i = 0; i < items; ++i) {
        const auto u = static_cast<std::size_t>(i);
        k::gemm(ta, tb, m, n, kk, a.data() + batch.a_item[u] * m * kk, b.data() + batch.b_item[u] * b_matrix, 0.0f,
                y.data() + i * m * n, ops);
      }
    }
  }
  recordBackward(y, {&a, &b}, [a, b, y = GradRef(y), batch, m, n, kk, ta, tb, fold, items, b_matrix] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    const k::GemmOperands a_ops = gemmOperands({gy.dtype(), b.dtype()}), b_ops = gemmOperands({gy.dtype(), a.dtype()});
    if (fold) {
      // dA = dY op(B)^T; dB = A^T dY (or its transpose), over all rows at once.
      if (a.requiresGrad()) gemmGrad(a, false, !tb, items * m, kk, n, gy.data(), b.data(), a_ops);
      if (b.requiresGrad()) {
        if (tb)
          gemmGrad(b, true, false, n, kk, items * m, gy.data(), a.data(), b_ops);
        else
          gemmGrad(b, true, false, kk, n, items * m, a.data(), gy.data(), b_ops);
      }
      return;
    }
    const float* dy = gy.data();
    if (a.requiresGrad())
      gradPerItem(a, batch.a_item, batch.a_items, m * kk, [&](std::size_t i, float* ga, float beta) {
        const float* bi = b.data() + batch.b_item[i] * b_matrix;
        const float* dyi = dy + static_cast<std::int64_t>(i) * m * n;
        if (!ta)
          k::gemm(false, !tb, m, kk, n, dyi, bi, beta, ga, a_ops);  // dA = dY op(B)^T
        else
          k::gemm(tb, true, kk, m, n, bi, dyi, beta, ga, a_ops);  // dA = op(B) dY^T
      });
    if (b.requiresGrad())
      gradPerItem(b, batch.b_item, batch.b_items, kk * n, [&](std::size_t i, float* gb, float beta) {
        const float* ai = a.data() + batch.a_item[i] * m * kk;
        const float* dyi = dy + static_cast<std::int64_t>(i) * m * n;
        if (!tb)
          k::gemm(!ta, false, kk, n, m, ai, dyi, beta, gb, b_ops);  // dB = op(A)^T dY
        else
          k::gemm(true, ta, n, kk, m, dyi, ai, beta, gb, b_ops);  // dB = dY^T op(A)
      });
  });
  return finish(y);
}

namespace {

// The kernels' shape of conv2d(x, w, ., o), after its argument checks.
k::Conv2dShape convShape(const Tensor& x, const Tensor& w, const Conv2dOptions& o) {
  require(x.ndim() == 4 && w.ndim() == 4 && x.size(1) == w.size(1), op::kConv2d,
          [&] { return fmt::format("input {} does not match weight {}", x.shape().str(), w.shape().str()); });
  require(o.stride >= 1 && o.padding >= 0, op::kConv2d, [&] {
    return fmt::format("stride {} and padding {}: expected stride >= 1, padding >= 0", o.stride, o.padding);
  });
  const k::Conv2dShape g{x.size(0), x.size(1), x.size(2), x.size(3), w.size(0),
                         w.size(2), w.size(3), o.stride,  o.padding};
  // Not outH() > 0: integer division truncates toward zero, so a kernel up
  // to stride-1 larger than the padded input would yield one output row.
  require(g.h + 2 * g.pad >= g.r && g.w + 2 * g.pad >= g.s, op::kConv2d, "kernel larger than the padded input");
  return g;
}

}  // namespace

Tensor conv2d(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, const Conv2dOptions& o) {
  const k::Conv2dShape g = convShape(x_in, w_in, o);
  const DType dt = computeDtype(op::kConv2d, {&x_in, &w_in, &b_in});
  const Tensor x = castTo(x_in, dt), w = castTo(w_in, dt), b = castTo(b_in, dt);
  Tensor y = like(x, {g.n, g.k, g.outH(), g.outW()});
  // The output is recorded last: its size carries the stride and padding.
  const OpRecord op_record = record(op::kConv2d, {&x, &w, &b, &y});
  if (computes(y)) k::conv2dForward(g, x.data(), w.data(), b.defined() ? b.data() : nullptr, y.data());
  recordBackward(y, {&x, &w, &b}, [x, w, b = GradRef(b), y = GradRef(y), g] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    const auto [gx, gw, gb] = gradTargets(x, w, b);
    if (computes(y))
      k::conv2dBackward(g, x.data(), w.data(), gy.data(), gx.data, gx.accumulate, gw.data, gw.accumulate, gb.data,
                        gb.accumulate);
    gradsWritten(x, w, b);
  });
  return finish(y);
}

Tensor conv2dMaxPool(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, const Conv2dOptions& o) {
  const Pool2dOptions pool{.kernel = 2};
  const k::Conv2dShape g = convShape(x_in, w_in, o);
  const DType dt = computeDtype(op::kConv2d, {&x_in, &w_in, &b_in});
  // Half types round the convolution's output before pooling; a window
  // larger than that output is max_pool2d's error.
  if (dt != DType::kFloat32 || g.outH() < 2 || g.outW() < 2) return maxPool2d(conv2d(x_in, w_in, b_in, o), pool);
  const Tensor x = castTo(x_in, dt), w = castTo(w_in, dt), b = castTo(b_in, dt);
  const Shape conv_shape{g.n, g.k, g.outH(), g.outW()};
  Tensor y = like(x, {g.n, g.k, g.outH() / 2, g.outW() / 2});
  // Arg-max positions: host memory, as maxPool2d keeps them.
  auto argmax = std::make_shared<std::vector<std::int32_t>>();
  // Recorded as conv2d and max_pool2d, with the operands they would have.
  const device::OperandInfo conv_out{conv_shape.dims(), dt};
  {
    std::array<device::OperandInfo, 4> operands{operandInfo(x), operandInfo(w), conv_out};
    if (b.defined()) operands = {operandInfo(x), operandInfo(w), operandInfo(b), conv_out};
    const OpRecord op_record = record(op::kConv2d, x.device(), std::span(operands.data(), b.defined() ? 4 : 3));
    if (computes(y)) {
      argmax->resize(static_cast<std::size_t>(y.numel()));
      k::conv2dMaxPoolForward(g, x.data(), w.data(), b.defined() ? b.data() : nullptr, y.data(), argmax->data());
    }
    recordBackward(y, {&x, &w, &b}, [x, w, b = GradRef(b), y = GradRef(y), g, argmax] {
      Tensor gy = y.grad();
      if (!gy.defined()) return;
      const auto [gx, gw, gb] = gradTargets(x, w, b);
      if (computes(y))
        k::conv2dMaxPoolBackward(g, x.data(), w.data(), gy.data(), argmax->data(), gx.data, gx.accumulate, gw.data,
                                 gw.accumulate, gb.data, gb.accumulate);
      gradsWritten(x, w, b);
    });
  }
  const OpRecord pool_record = record(op::kMaxPool2d, x.device(), std::span(&conv_out, 1));
  return finish(y);
}

}  // namespace hpu::core::ops
