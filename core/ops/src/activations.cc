// Elementwise activations, softmax and dropout.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "hpu/core/ops/ops.h"
#include "hpu/device/kernels/activation.h"
#include "hpu/device/kernels/loss.h"
#include "op_support.h"

namespace hpu::core::ops {

using namespace detail;
namespace k = device::kernels;

namespace {

Tensor activation(const OpInfo& op, k::Activation a, const Tensor& x_in) {
  const Tensor x = castTo(x_in, computeDtype(op, {&x_in}));
  const OpRecord op_record = record(op, {&x});
  Tensor y = like(x, x.shape());
  if (computes(y)) k::activationForward(a, x.data(), y.data(), x.numel());
  // The backward keeps the one of x and y its formula reads.
  const k::ActivationReads reads = k::activationBackwardReads(a);
  const Tensor x_saved = reads.x ? x : Tensor(), y_saved = reads.y ? y : Tensor();
  recordBackward(y, {&x}, [a, x = GradRef(x), y = GradRef(y), x_saved, y_saved] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget g = gradTarget(x);
    if (g.data != nullptr)
      k::activationBackward(a, x_saved.defined() ? x_saved.data() : nullptr,
                            y_saved.defined() ? y_saved.data() : nullptr, gy.data(), g.data, x.numel(), g.accumulate);
    gradWritten(x);
  });
  return finish(y);
}

}  // namespace

Tensor relu(const Tensor& x) { return activation(op::kRelu, k::Activation::kReLU, x); }
Tensor gelu(const Tensor& x, bool approximate) {
  return approximate ? activation(op::kGeluTanh, k::Activation::kGELUTanh, x)
                     : activation(op::kGelu, k::Activation::kGELU, x);
}
Tensor tanh(const Tensor& x) { return activation(op::kTanh, k::Activation::kTanh, x); }
Tensor sigmoid(const Tensor& x) { return activation(op::kSigmoid, k::Activation::kSigmoid, x); }
Tensor silu(const Tensor& x) { return activation(op::kSilu, k::Activation::kSiLU, x); }

Tensor softcap(const Tensor& x_in, float cap) {
  require(cap > 0.0f, op::kSoftcap, [&] { return fmt::format("cap {} must be positive", cap); });
  const Tensor x = castTo(x_in, computeDtype(op::kSoftcap, {&x_in}));
  const OpRecord op_record = record(op::kSoftcap, {&x});
  Tensor y = like(x, x.shape());
  const std::int64_t n = x.numel();
  // As transformers computes it: the logits divided by the cap, tanh, times the cap.
  if (computes(y))
    for (std::int64_t i = 0; i < n; ++i) y.data()[i] = std::tanh(x.data()[i] / cap) * cap;
  recordBackward(y, {&x}, [x = GradRef(x), y, n, cap] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget g = gradTarget(x);
    if (g.data != nullptr)
      for (std::int64_t i = 0; i < n; ++i) {
        const float t = y.data()[i] / cap;  // tanh(x / cap)
        const float d = gy.data()[i] * (1.0f - t * t);
        g.data[i] = g.accumulate ? g.data[i] + d : d;
      }
    gradWritten(x);
  });
  return finish(y);
}

Tensor swiglu(const Tensor& gate_in, const Tensor& up_in) {
  require(gate_in.shape() == up_in.shape(), op::kSwiglu,
          [&] { return fmt::format("gate {} and up {} differ in shape", gate_in.shape().str(), up_in.shape().str()); });
  const DType dt = computeDtype(op::kSwiglu, {&gate_in, &up_in});
  const Tensor gate = castTo(gate_in, dt), up = castTo(up_in, dt);
  const OpRecord op_record = record(op::kSwiglu, {&gate, &up});
  Tensor y = like(gate, gate.shape());
  if (computes(y)) k::swigluForward(gate.data(), up.data(), y.data(), y.numel());
  recordBackward(y, {&gate, &up}, [gate, up, y = GradRef(y)] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    // Both gradients come from one pass: accumulation state is per input.
    GradTarget gg{nullptr, false}, gu{nullptr, false};
    if (wants(gate)) gg = gradTarget(gate);
    if (wants(up)) gu = gradTarget(up);
    if (computes(y)) {
      if (gg.accumulate == gu.accumulate || !wants(gate) || !wants(up)) {
        k::swigluBackward(gate.data(), up.data(), gy.data(), gg.data, gu.data, y.numel(),
                          wants(gate) ? gg.accumulate : gu.accumulate);
      } else {
        k::swigluBackward(gate.data(), up.data(), gy.data(), gg.data, nullptr, y.numel(), gg.accumulate);
        k::swigluBackward(gate.data(), up.data(), gy.data(), nullptr, gu.data, y.numel(), gu.accumulate);
      }
    }
    if (wants(gate)) gradWritten(gate);
    if (wants(up)) gradWritten(up);
  });
  return finish(y);
}

Tensor swiglu(Tensor&& gate, const Tensor& up_in) {
  Tensor y = takeOverAtLastUse(op::kSwiglu, gate, up_in);
  if (!y.defined()) return swiglu(static_cast<const Tensor&>(gate), up_in);
  const Tensor up = castTo(up_in, y.dtype());
  const OpRecord op_record = record(op::kSwiglu, {&y, &up});  // y holds the gate until the kernel runs
  if (computes(y)) k::swigluForward(y.data(), up.data(), y.data(), y.numel());
  return finish(y);
}

Tensor softmax(const Tensor& x_in) {
  const Tensor x = castTo(x_in, computeDtype(op::kSoftmax, {&x_in}));
  const std::int64_t c = x.size(-1), rows = x.numel() / c;
  const OpRecord op_record = record(op::kSoftmax, {&x});
  Tensor y = like(x, x.shape());
  if (computes(y)) k::softmaxForward(x.data(), rows, c, y.data());
  recordBackward(y, {&x}, [x = GradRef(x), y, rows, c] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget g = gradTarget(x);
    if (g.data != nullptr) k::softmaxBackward(y.data(), gy.data(), rows, c, g.data, g.accumulate);
    gradWritten(x);
  });
  return finish(y);
}

Tensor attentionSoftmax(const Tensor& x_in, const AttentionMask& m) {
  const Tensor x = castTo(x_in, computeDtype(op::kAttentionSoftmax, {&x_in}));
  const std::int64_t c = x.size(-1), rows = x.numel() / c, kv_length = m.kv_length < 0 ? c : m.kv_length;
  require(x.ndim() >= 2 && m.queries >= 1 && x.size(-2) % m.queries == 0 && kv_length <= c &&
              kv_length >= m.queries,
          op::kAttentionSoftmax, [&] {
            return fmt::format("scores {} for {} queries over {} keys", x.shape().str(), m.queries, kv_length);
          });
  const OpRecord op_record = record(op::kAttentionSoftmax, {&x});
  Tensor y = like(x, x.shape());
  if (computes(y)) {
    const std::int64_t first = kv_length - m.queries;  // the first query's position
    const float* px = x.data();
    float* py = y.data();
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t at = first + r % m.queries;
      const std::int64_t lo = m.sliding_window > 0 ? std::max<std::int64_t>(0, at - m.sliding_window + 1) : 0;
      const std::int64_t hi = m.causal ? at + 1 : kv_length;  // keys [lo, hi) are seen
      float* out = py + r * c;
      std::fill(out, out + c, -std::numeric_limits<float>::infinity());
      if (m.softcap > 0.0f)
        for (std::int64_t j = lo; j < hi; ++j) out[j] = std::tanh(m.scale * px[r * c + j] / m.softcap) * m.softcap;
      else
        for (std::int64_t j = lo; j < hi; ++j) out[j] = m.scale * px[r * c + j];
    }
    k::softmaxForward(py, rows, c, py);
  }
  // Soft-capping's backward reads the scores.
  const Tensor x_saved = m.softcap > 0.0f ? x : Tensor();
  recordBackward(y, {&x}, [x = GradRef(x), x_saved, y, rows, c, scale = m.scale, cap = m.softcap] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget g = gradTarget(x);
    if (g.data != nullptr) {
      // d(scale * x), or of cap * tanh(scale * x / cap): the softmax's
      // backward (masked keys have p = 0), times the derivative of the score.
      std::vector<float> d(static_cast<std::size_t>(rows * c));
      k::softmaxBackward(y.data(), gy.data(), rows, c, d.data(), false);
      for (std::int64_t i = 0; i < rows * c; ++i) {
        float v = scale * d[static_cast<std::size_t>(i)];
        if (cap > 0.0f) {
          const float t = std::tanh(scale * x_saved.data()[i] / cap);
          v *= 1.0f - t * t;
        }
        g.data[i] = g.accumulate ? g.data[i] + v : v;
      }
    }
    gradWritten(x);
  });
  return finish(y);
}

Tensor dropout(const Tensor& x_in, float p, bool training, Generator& rng, SequencePart part) {
  if (!training || p == 0.0f) return x_in;
  const Tensor x = castTo(x_in, computeDtype(op::kDropout, {&x_in}));
  const OpRecord op_record = record(op::kDropout, {&x});
  const std::int64_t n = x.numel();
  Tensor y = like(x, x.shape());
  // The mask: host memory, as the device keeps it in its workspace.
  std::shared_ptr<float[]> mask;
  if (computes(y)) {
    // One generator step per call: the mask is a counter-based stream under
    // that key (kernels::dropoutForward), drawn on any number of threads.
    mask.reset(new float[static_cast<std::size_t>(n)]);
    const std::uint64_t key = rng.next();
    if (part.whole == 0 || part.whole == x.size(1)) {
      k::dropoutForward(key, p, x.data(), y.data(), mask.get(), n);
    } else {
      // The whole sequence's mask (drawn on ones), then this part's rows of it.
      const std::int64_t batch = x.size(0), rows = x.size(1), row = n / (batch * rows), whole = batch * part.whole * row;
      std::vector<float> ones(static_cast<std::size_t>(whole), 1.0f), scaled(ones.size()), all(ones.size());
      k::dropoutForward(key, p, ones.data(), scaled.data(), all.data(), whole);
      for (std::int64_t b = 0; b < batch; ++b)
        std::copy_n(all.begin() + (b * part.whole + part.first) * row, rows * row, mask.get() + b * rows * row);
      for (std::int64_t i = 0; i < n; ++i) y.data()[i] = x.data()[i] * mask[static_cast<std::size_t>(i)];
    }
  }
  recordBackward(y, {&x}, [x = GradRef(x), y = GradRef(y), n, mask] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget g = gradTarget(x);
    if (g.data != nullptr) k::dropoutBackward(mask.get(), gy.data(), g.data, n, g.accumulate);
    gradWritten(x);
  });
  return finish(y);
}

}  // namespace hpu::core::ops
