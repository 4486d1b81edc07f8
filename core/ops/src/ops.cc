// The differentiable ops: argument checks, autocast (cast inputs, round the
// output), lazy-graph recording and the tape entries; the arithmetic is the
// device's kernels (device/kernels/).
#include "hpu/core/ops/ops.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>

#include "hpu/core/base/errors.h"
#include "hpu/core/ops/autocast.h"
#include "hpu/core/tensor/autograd.h"
#include "hpu/device/kernels/activation.h"
#include "hpu/device/kernels/conv.h"
#include "hpu/device/kernels/gemm.h"
#include "hpu/device/kernels/loss.h"
#include "hpu/device/kernels/norm.h"
#include "hpu/device/kernels/pool.h"
#include "hpu/device/numerics.h"

namespace hpu::core::ops {
namespace {

namespace k = device::kernels;
using autograd::GradTarget;
using autograd::gradTarget;
using autograd::gradWritten;

// Records an op (see OpRecord); the result must live until the op returns.
OpRecord recordOp(device::OpName name, std::initializer_list<const Tensor*> operands) {
  std::array<device::OperandInfo, 4> infos;
  std::size_t n = 0;
  const Tensor* first = nullptr;
  for (const Tensor* t : operands)
    if (t != nullptr && t->defined()) {
      infos[n++] = operandInfo(*t);
      if (first == nullptr) first = t;
    }
  return OpRecord(first->device(), name, std::span<const device::OperandInfo>(infos.data(), n));
}

// A new tensor on t's device with t's (floating) dtype.
Tensor like(const Tensor& t, const Shape& shape) {
  return Tensor::empty(t.device(), shape, device::isFloating(t.dtype()) ? t.dtype() : DType::kFloat32);
}

// The widest floating dtype of the inputs (fp32 if two half types mix).
DType widest(std::initializer_list<const Tensor*> inputs) {
  DType best = DType::kFloat32;
  bool any = false;
  for (const Tensor* t : inputs) {
    if (t == nullptr || !t->defined() || !device::isFloating(t->dtype())) continue;
    const DType d = t->dtype();
    if (!any) {
      best = d;
      any = true;
    } else if (d != best) {
      const auto size = device::logicalSize(d), best_size = device::logicalSize(best);
      best = size > best_size ? d : size < best_size ? best : DType::kFloat32;
    }
  }
  return best;
}

// The dtype an op runs in under the current autocast state.
DType opDtype(std::string_view op, std::initializer_list<const Tensor*> inputs) {
  return autocast::computeDtype(op, widest(inputs));
}

// Rounds an op's output to its dtype (kernels compute in fp32).
Tensor finish(Tensor y) {
  if (y.dtype() != DType::kFloat32 && device::isFloating(y.dtype())) device::roundInPlace(y.values(), y.dtype());
  return y;
}

// Marks `out` as produced by a recorded op and counts the inputs' uses.
void track(Tensor& out, std::initializer_list<const Tensor*> inputs) {
  out.setRequiresGrad(true);
  for (const Tensor* t : inputs)
    if (t != nullptr && t->defined() && t->requiresGrad()) autograd::noteUse(*t);
}

// Records `backward` for `out` when any input needs a gradient.
template <class Backward>
void recordBackward(Tensor& out, std::initializer_list<const Tensor*> inputs, Backward backward) {
  if (!autograd::needsGrad(inputs)) return;
  track(out, inputs);
  autograd::currentTape()->record(std::move(backward), lastRecordedOp());
}

bool wants(const Tensor& t) { return t.defined() && t.requiresGrad(); }

// Adds `src` (t.numel() values) into the gradient of t.
void accumulateGrad(const Tensor& t, const float* src) {
  GradTarget g = gradTarget(t);
  const std::int64_t n = t.numel();
  if (g.accumulate)
    for (std::int64_t i = 0; i < n; ++i) g.data[i] += src[i];
  else
    std::copy(src, src + n, g.data);
  gradWritten(t);
}

void require(bool ok, const char* op, const std::string& what) {
  if (!ok) throw Error(fmt::format("{}: {}", op, what));
}

// target's gradient (+)= op(a) op(b), a GEMM into the gradient buffer.
void gemmGrad(const Tensor& target, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t kk, const float* a,
              const float* b) {
  GradTarget g = gradTarget(target);
  k::gemm(ta, tb, m, n, kk, a, b, g.accumulate ? 1.0f : 0.0f, g.data);
  gradWritten(target);
}

// A differentiable cast: a copy rounded to `dt` (x itself if it already is).
Tensor castTo(const Tensor& x, DType dt) {
  if (!x.defined() || x.dtype() == dt || !device::isFloating(x.dtype())) return x;
  const OpRecord op_record = recordOp("cast", {&x});
  Tensor y = Tensor::empty(x.device(), x.shape(), dt);
  std::copy(x.data(), x.data() + x.numel(), y.data());
  device::roundInPlace(y.values(), dt);
  recordBackward(y, {&x}, [x, y] {
    if (Tensor gy = y.grad(); gy.defined()) accumulateGrad(x, gy.data());
  });
  return y;
}

Tensor activation(device::OpName name, k::Activation a, const Tensor& x_in) {
  const Tensor x = castTo(x_in, opDtype(name.name(), {&x_in}));
  const OpRecord op_record = recordOp(name, {&x});
  Tensor y = like(x, x.shape());
  k::activationForward(a, x.data(), y.data(), x.numel());
  recordBackward(y, {&x}, [a, x, y] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget g = gradTarget(x);
    k::activationBackward(a, x.data(), y.data(), gy.data(), g.data, x.numel(), g.accumulate);
    gradWritten(x);
  });
  return finish(y);
}

// a (op) b elementwise on equal shapes; backward gives da = dy * da_coef and
// db = dy * db_coef, both functions of (a, b).
template <class F, class DA, class DB>
Tensor binary(device::OpName name, const Tensor& a_in, const Tensor& b_in, F f, DA da, DB db) {
  require(a_in.shape() == b_in.shape(), name.name().data(),
          fmt::format("shapes {} and {} differ (no broadcasting)", a_in.shape().str(), b_in.shape().str()));
  const DType dt = opDtype(name.name(), {&a_in, &b_in});
  const Tensor a = castTo(a_in, dt), b = castTo(b_in, dt);
  const OpRecord op_record = recordOp(name, {&a, &b});
  const std::int64_t n = a.numel();
  Tensor y = like(a, a.shape());
  for (std::int64_t i = 0; i < n; ++i) y.data()[i] = f(a.data()[i], b.data()[i]);
  recordBackward(y, {&a, &b}, [a, b, y, n, da, db] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    auto grad = [&](const Tensor& t, auto coef) {
      if (!t.requiresGrad()) return;
      GradTarget g = gradTarget(t);
      for (std::int64_t i = 0; i < n; ++i) {
        const float d = gy.data()[i] * coef(a.data()[i], b.data()[i]);
        g.data[i] = g.accumulate ? g.data[i] + d : d;
      }
      gradWritten(t);
    };
    grad(a, da);
    grad(b, db);
  });
  return finish(y);
}

// A scalar loss tensor (shape []) holding `value`.
Tensor scalar(device::Device& dev, double value) {
  return Tensor::full(dev, {1}, static_cast<float>(value)).reshaped(Shape{});
}

}  // namespace


// ------------------------------------------------------------------ products

Tensor linear(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in) {
  require(x_in.ndim() >= 1 && w_in.ndim() == 2 && x_in.size(-1) == w_in.size(1), "linear",
          fmt::format("input {} does not match weight {}", x_in.shape().str(), w_in.shape().str()));
  const DType dt = opDtype("linear", {&x_in, &w_in, &b_in});
  const Tensor x = castTo(x_in, dt), w = castTo(w_in, dt), b = castTo(b_in, dt);
  const OpRecord op_record = recordOp("linear", {&x, &w, &b});
  const std::int64_t in = w.size(1), out = w.size(0), n = x.numel() / in;
  Shape ys = x.shape();
  ys[-1] = out;
  Tensor y = like(x, ys);
  k::gemm(false, true, n, out, in, x.data(), w.data(), 0.0f, y.data());
  if (b.defined()) k::addRowBias(y.data(), b.data(), n, out);
  recordBackward(y, {&x, &w, &b}, [x, w, b, y, n, in, out] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    if (w.requiresGrad()) gemmGrad(w, true, false, out, in, n, gy.data(), x.data());
    if (wants(b)) {
      GradTarget g = gradTarget(b);
      k::columnSums(gy.data(), n, out, g.data, g.accumulate);
      gradWritten(b);
    }
    if (x.requiresGrad()) gemmGrad(x, false, false, n, in, out, gy.data(), w.data());
  });
  return finish(y);
}

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  require(a_in.ndim() == 2 && b_in.ndim() == 2 && a_in.size(1) == b_in.size(0), "matmul",
          fmt::format("shapes {} and {} do not chain", a_in.shape().str(), b_in.shape().str()));
  const DType dt = opDtype("matmul", {&a_in, &b_in});
  const Tensor a = castTo(a_in, dt), b = castTo(b_in, dt);
  const OpRecord op_record = recordOp("matmul", {&a, &b});
  const std::int64_t n = a.size(0), kk = a.size(1), m = b.size(1);
  Tensor y = like(a, {n, m});
  k::gemm(false, false, n, m, kk, a.data(), b.data(), 0.0f, y.data());
  recordBackward(y, {&a, &b}, [a, b, y, n, kk, m] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    if (a.requiresGrad()) gemmGrad(a, false, true, n, kk, m, gy.data(), b.data());
    if (b.requiresGrad()) gemmGrad(b, true, false, kk, m, n, a.data(), gy.data());
  });
  return finish(y);
}

Tensor conv2d(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, const Conv2dOptions& o) {
  require(x_in.ndim() == 4 && w_in.ndim() == 4 && x_in.size(1) == w_in.size(1), "conv2d",
          fmt::format("input {} does not match weight {}", x_in.shape().str(), w_in.shape().str()));
  const DType dt = opDtype("conv2d", {&x_in, &w_in, &b_in});
  const Tensor x = castTo(x_in, dt), w = castTo(w_in, dt), b = castTo(b_in, dt);
  require(o.stride >= 1 && o.padding >= 0, "conv2d",
          fmt::format("stride {} and padding {}: expected stride >= 1, padding >= 0", o.stride, o.padding));
  const k::Conv2dShape g{x.size(0), x.size(1), x.size(2), x.size(3), w.size(0), w.size(2), w.size(3), o.stride, o.padding};
  // Not outH() > 0: integer division truncates toward zero, so a kernel up
  // to stride-1 larger than the padded input would yield one output row.
  require(g.h + 2 * g.pad >= g.r && g.w + 2 * g.pad >= g.s, "conv2d", "kernel larger than the padded input");
  const OpRecord op_record = recordOp("conv2d", {&x, &w, &b});
  Tensor y = like(x, {g.n, g.k, g.outH(), g.outW()});
  k::conv2dForward(g, x.data(), w.data(), b.defined() ? b.data() : nullptr, y.data());
  recordBackward(y, {&x, &w, &b}, [x, w, b, y, g] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget gx{nullptr, false}, gw{nullptr, false}, gb{nullptr, false};
    if (x.requiresGrad()) gx = gradTarget(x);
    if (w.requiresGrad()) gw = gradTarget(w);
    if (wants(b)) gb = gradTarget(b);
    k::conv2dBackward(g, x.data(), w.data(), gy.data(), gx.data, gx.accumulate, gw.data, gw.accumulate, gb.data,
                      gb.accumulate);
    for (const Tensor* t : {&x, &w, &b})
      if (wants(*t)) gradWritten(*t);
  });
  return finish(y);
}

// ------------------------------------------------------------------ pooling

namespace {
k::Pool2dShape poolShape(const Tensor& x, const Pool2dOptions& o, const char* op) {
  require(x.ndim() == 4, op, "expects [N, C, H, W], got " + x.shape().str());
  // As torch: a window must overlap the input (a max-pool window of padding
  // only would have no arg-max).
  require(o.kernel >= 1 && o.stride >= 0 && o.padding >= 0 && o.padding <= o.kernel / 2, op,
          fmt::format("kernel {}, stride {}, padding {}: expected kernel >= 1, stride >= 0 and padding at most half "
                      "the kernel",
                      o.kernel, o.stride, o.padding));
  const k::Pool2dShape g{x.size(0) * x.size(1), x.size(2), x.size(3), o.kernel, o.stride ? o.stride : o.kernel, o.padding};
  // Checked before outH(): integer division truncates toward zero.
  require(g.h + 2 * g.pad >= g.kernel && g.w + 2 * g.pad >= g.kernel, op, "window larger than the padded input");
  return g;
}
}  // namespace

Tensor maxPool2d(const Tensor& x_in, const Pool2dOptions& o) {
  const Tensor x = castTo(x_in, opDtype("max_pool2d", {&x_in}));
  const k::Pool2dShape g = poolShape(x, o, "max_pool2d");
  const OpRecord op_record = recordOp("max_pool2d", {&x});
  Tensor y = like(x, {x.size(0), x.size(1), g.outH(), g.outW()});
  auto argmax = std::make_shared<std::vector<std::int32_t>>(static_cast<std::size_t>(y.numel()));
  k::maxPool2dForward(g, x.data(), y.data(), argmax->data());
  recordBackward(y, {&x}, [x, y, g, argmax] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget gx = gradTarget(x);
    k::maxPool2dBackward(g, gy.data(), argmax->data(), gx.data, gx.accumulate);
    gradWritten(x);
  });
  return finish(y);
}

Tensor avgPool2d(const Tensor& x_in, const Pool2dOptions& o) {
  const Tensor x = castTo(x_in, opDtype("avg_pool2d", {&x_in}));
  const k::Pool2dShape g = poolShape(x, o, "avg_pool2d");
  const OpRecord op_record = recordOp("avg_pool2d", {&x});
  Tensor y = like(x, {x.size(0), x.size(1), g.outH(), g.outW()});
  k::avgPool2dForward(g, x.data(), y.data());
  recordBackward(y, {&x}, [x, y, g] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget gx = gradTarget(x);
    k::avgPool2dBackward(g, gy.data(), gx.data, gx.accumulate);
    gradWritten(x);
  });
  return finish(y);
}

// ------------------------------------------------------------------ activations

Tensor relu(const Tensor& x) { return activation("relu", k::Activation::kReLU, x); }
Tensor gelu(const Tensor& x, bool approximate) {
  return approximate ? activation("gelu_tanh", k::Activation::kGELUTanh, x) : activation("gelu", k::Activation::kGELU, x);
}
Tensor tanh(const Tensor& x) { return activation("tanh", k::Activation::kTanh, x); }
Tensor sigmoid(const Tensor& x) { return activation("sigmoid", k::Activation::kSigmoid, x); }

Tensor dropout(const Tensor& x_in, float p, bool training, Generator& rng) {
  if (!training || p == 0.0f) return x_in;
  const Tensor x = castTo(x_in, opDtype("dropout", {&x_in}));
  const OpRecord op_record = recordOp("dropout", {&x});
  const std::int64_t n = x.numel();
  // Two 32-bit draws per generator step: element i is dropped when its draw
  // falls below p * 2^32; kept ones are scaled by 1 / (1 - p).
  auto mask = std::make_shared<std::vector<float>>(static_cast<std::size_t>(n));
  const float keep = 1.0f / (1.0f - p);
  const auto threshold = static_cast<std::uint64_t>(static_cast<double>(p) * 4294967296.0);
  float* m = mask->data();
  for (std::int64_t i = 0; i < n; i += 2) {
    const std::uint64_t r = rng.next();
    m[i] = (r & 0xffffffffu) < threshold ? 0.0f : keep;
    if (i + 1 < n) m[i + 1] = (r >> 32) < threshold ? 0.0f : keep;
  }
  Tensor y = like(x, x.shape());
  const float* __restrict xp = x.data();
  float* __restrict yp = y.data();
  for (std::int64_t i = 0; i < n; ++i) yp[i] = xp[i] * m[i];
  recordBackward(y, {&x}, [x, y, n, mask] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget g = gradTarget(x);
    const float* mk = mask->data();
    for (std::int64_t i = 0; i < n; ++i) g.data[i] = g.accumulate ? g.data[i] + gy.data()[i] * mk[i] : gy.data()[i] * mk[i];
    gradWritten(x);
  });
  return finish(y);
}

// ------------------------------------------------------------------ shapes

Tensor reshape(const Tensor& x, const Shape& shape) {
  require(shape.numel() == x.numel(), "reshape", fmt::format("{} to {}", x.shape().str(), shape.str()));
  Tensor y = x.reshaped(shape);
  recordBackward(y, {&x}, [x, y] {
    if (Tensor gy = y.grad(); gy.defined()) accumulateGrad(x, gy.data());
  });
  return y;
}

Tensor flatten(const Tensor& x, int start_dim) {
  std::vector<std::int64_t> dims;
  for (int i = 0; i < start_dim; ++i) dims.push_back(x.size(i));
  dims.push_back(x.shape().tail(start_dim));
  return reshape(x, Shape(std::span<const std::int64_t>(dims)));
}

// ------------------------------------------------------------------ normalisation

Tensor layerNorm(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, float eps) {
  const DType dt = opDtype("layer_norm", {&x_in, &w_in, &b_in});
  const Tensor x = castTo(x_in, dt), w = castTo(w_in, dt), b = castTo(b_in, dt);
  const std::int64_t d = x.size(-1), rows = x.numel() / d;
  const OpRecord op_record = recordOp("layer_norm", {&x, &w, &b});
  Tensor y = like(x, x.shape());
  auto stats = std::make_shared<std::vector<float>>(static_cast<std::size_t>(2 * rows));
  k::layerNormForward(x.data(), rows, d, w.defined() ? w.data() : nullptr, b.defined() ? b.data() : nullptr, eps,
                      y.data(), stats->data());
  recordBackward(y, {&x, &w, &b}, [x, w, b, y, stats, rows, d] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget gx{nullptr, false}, gw{nullptr, false}, gb{nullptr, false};
    if (x.requiresGrad()) gx = gradTarget(x);
    if (wants(w)) gw = gradTarget(w);
    if (wants(b)) gb = gradTarget(b);
    // w and b share accumulation state: both are fresh or both accumulate.
    k::layerNormBackward(x.data(), gy.data(), rows, d, w.defined() ? w.data() : nullptr, stats->data(), gx.data,
                         gx.accumulate, gw.data, gb.data, gw.accumulate || gb.accumulate);
    for (const Tensor* t : {&x, &w, &b})
      if (wants(*t)) gradWritten(*t);
  });
  return finish(y);
}

Tensor batchNorm2d(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, Tensor& running_mean,
                   Tensor& running_var, bool training, float momentum, float eps) {
  require(x_in.ndim() == 4, "batch_norm2d", "expects [N, C, H, W], got " + x_in.shape().str());
  const DType dt = opDtype("batch_norm", {&x_in, &w_in, &b_in});
  const Tensor x = castTo(x_in, dt), w = castTo(w_in, dt), b = castTo(b_in, dt);
  const k::BatchNormShape g{x.size(0), x.size(1), x.size(2) * x.size(3)};
  const OpRecord op_record = recordOp("batch_norm", {&x, &w, &b});
  Tensor y = like(x, x.shape());
  auto stats = std::make_shared<std::vector<float>>(static_cast<std::size_t>(2 * g.c));
  k::batchNorm2dForward(g, x.data(), w.defined() ? w.data() : nullptr, b.defined() ? b.data() : nullptr,
                        running_mean.data(), running_var.data(), training, momentum, eps, y.data(), stats->data());
  recordBackward(y, {&x, &w, &b}, [x, w, b, y, stats, g, training] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget gx{nullptr, false}, gw{nullptr, false}, gb{nullptr, false};
    if (x.requiresGrad()) gx = gradTarget(x);
    if (wants(w)) gw = gradTarget(w);
    if (wants(b)) gb = gradTarget(b);
    k::batchNorm2dBackward(g, x.data(), gy.data(), w.defined() ? w.data() : nullptr, stats->data(), training, gx.data,
                           gx.accumulate, gw.data, gb.data, gw.accumulate || gb.accumulate);
    for (const Tensor* t : {&x, &w, &b})
      if (wants(*t)) gradWritten(*t);
  });
  return finish(y);
}

Tensor embedding(const Tensor& indices, const Tensor& w_in) {
  require(indices.dtype() == DType::kInt64 && w_in.ndim() == 2, "embedding", "expects int64 indices and a [num, dim] weight");
  const Tensor w = castTo(w_in, opDtype("embedding", {&w_in}));
  const OpRecord op_record = recordOp("embedding", {&indices, &w});
  const std::int64_t num = w.size(0), dim = w.size(1), n = indices.numel();
  std::vector<std::int64_t> dims(indices.shape().dims().begin(), indices.shape().dims().end());
  dims.push_back(dim);
  Tensor y = like(w, Shape(std::span<const std::int64_t>(dims)));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t row = indices.labels()[i];
    if (row < 0 || row >= num) throw Error(fmt::format("embedding: index {} out of range for {} embeddings", row, num));
    std::copy(w.data() + row * dim, w.data() + (row + 1) * dim, y.data() + i * dim);
  }
  recordBackward(y, {&w}, [indices, w, y, n, dim] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget g = gradTarget(w);
    if (!g.accumulate) std::fill(g.data, g.data + w.numel(), 0.0f);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t row = indices.labels()[i];
      for (std::int64_t j = 0; j < dim; ++j) g.data[row * dim + j] += gy.data()[i * dim + j];
    }
    gradWritten(w);
  });
  return finish(y);
}

// ------------------------------------------------------------------ losses

Tensor crossEntropy(const Tensor& logits_in, const Tensor& labels, float label_smoothing) {
  require(logits_in.ndim() == 2 && labels.dtype() == DType::kInt64 && labels.numel() == logits_in.size(0),
          "cross_entropy",
          fmt::format("expects logits [N, C] and int64 labels [N], got {} and {}", logits_in.shape().str(),
                      labels.shape().str()));
  const Tensor logits = castTo(logits_in, opDtype("cross_entropy", {&logits_in}));
  const OpRecord op_record = recordOp("cross_entropy", {&logits, &labels});
  const std::int64_t n = logits.size(0), c = logits.size(1);
  for (std::int64_t r = 0; r < n; ++r)
    if (labels.labels()[r] < 0 || labels.labels()[r] >= c)
      throw Error(fmt::format("cross_entropy: label {} of sample {} is outside the {} classes", labels.labels()[r], r, c));
  auto probs = std::make_shared<std::vector<float>>(static_cast<std::size_t>(n * c));
  Tensor loss = scalar(logits.device(), k::softmaxCrossEntropyForward(logits.data(), labels.labels(), n, c,
                                                                      label_smoothing, probs->data()));
  recordBackward(loss, {&logits}, [logits, labels, loss, probs, n, c, label_smoothing] {
    Tensor gl = loss.grad();
    if (!gl.defined()) return;
    GradTarget g = gradTarget(logits);
    k::softmaxCrossEntropyBackward(probs->data(), labels.labels(), n, c, label_smoothing,
                                   gl.item() / static_cast<float>(n), g.data, g.accumulate);
    gradWritten(logits);
  });
  return loss;
}

Tensor mseLoss(const Tensor& p_in, const Tensor& t_in) {
  require(p_in.shape() == t_in.shape(), "mse_loss",
          fmt::format("shapes {} and {} differ", p_in.shape().str(), t_in.shape().str()));
  const DType dt = opDtype("mse_loss", {&p_in, &t_in});
  const Tensor prediction = castTo(p_in, dt), target = castTo(t_in, dt);
  const OpRecord op_record = recordOp("mse_loss", {&prediction, &target});
  const std::int64_t n = prediction.numel();
  Tensor loss = scalar(prediction.device(), k::mseForward(prediction.data(), target.data(), n));
  recordBackward(loss, {&prediction, &target}, [prediction, target, loss, n] {
    Tensor gl = loss.grad();
    if (!gl.defined()) return;
    const float scale = 2.0f * gl.item() / static_cast<float>(n);
    auto grad = [&](const Tensor& t, float sign) {
      if (!t.requiresGrad()) return;
      GradTarget g = gradTarget(t);
      for (std::int64_t i = 0; i < n; ++i) {
        const float d = sign * scale * (prediction.data()[i] - target.data()[i]);
        g.data[i] = g.accumulate ? g.data[i] + d : d;
      }
      gradWritten(t);
    };
    grad(prediction, 1.0f);
    grad(target, -1.0f);
  });
  return loss;
}

// ------------------------------------------------------------------ elementwise

Tensor add(const Tensor& a, const Tensor& b) {
  return binary(
      "add", a, b, [](float x, float y) { return x + y; }, [](float, float) { return 1.0f; },
      [](float, float) { return 1.0f; });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  return binary(
      "sub", a, b, [](float x, float y) { return x - y; }, [](float, float) { return 1.0f; },
      [](float, float) { return -1.0f; });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  return binary(
      "mul", a, b, [](float x, float y) { return x * y; }, [](float, float y) { return y; },
      [](float x, float) { return x; });
}

Tensor scale(const Tensor& a_in, float s) {
  const Tensor a = castTo(a_in, opDtype("scale", {&a_in}));
  const OpRecord op_record = recordOp("scale", {&a});
  Tensor y = like(a, a.shape());
  for (std::int64_t i = 0; i < a.numel(); ++i) y.data()[i] = a.data()[i] * s;
  recordBackward(y, {&a}, [a, y, s] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget g = gradTarget(a);
    for (std::int64_t i = 0; i < a.numel(); ++i) g.data[i] = g.accumulate ? g.data[i] + gy.data()[i] * s : gy.data()[i] * s;
    gradWritten(a);
  });
  return finish(y);
}

Tensor sum(const Tensor& a_in) {
  const Tensor a = castTo(a_in, opDtype("sum", {&a_in}));
  const OpRecord op_record = recordOp("sum", {&a});
  double total = 0;
  for (float v : a.values()) total += v;
  Tensor y = scalar(a.device(), total);
  recordBackward(y, {&a}, [a, y] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    const float d = gy.item();
    GradTarget g = gradTarget(a);
    for (std::int64_t i = 0; i < a.numel(); ++i) g.data[i] = g.accumulate ? g.data[i] + d : d;
    gradWritten(a);
  });
  return y;
}

Tensor mean(const Tensor& a) { return scale(sum(a), 1.0f / static_cast<float>(a.numel())); }

Tensor softmax(const Tensor& x_in) {
  const Tensor x = castTo(x_in, opDtype("softmax", {&x_in}));
  const std::int64_t c = x.size(-1), rows = x.numel() / c;
  const OpRecord op_record = recordOp("softmax", {&x});
  Tensor y = like(x, x.shape());
  k::softmaxForward(x.data(), rows, c, y.data());
  recordBackward(y, {&x}, [x, y, rows, c] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget g = gradTarget(x);
    k::softmaxBackward(y.data(), gy.data(), rows, c, g.data, g.accumulate);
    gradWritten(x);
  });
  return finish(y);
}

std::int64_t countCorrect(const Tensor& logits, const Tensor& labels) {
  const std::int64_t n = logits.size(0);
  return k::countArgmaxMatches(logits.data(), labels.labels(), n, logits.numel() / n);
}

}  // namespace hpu::core::ops
