#include "hpu/core/estimate/op_costs.h"

#include <algorithm>
#include <numeric>

namespace hpu::core::estimate {
namespace {

using device::DType;
using device::OperandInfo;

double numel(const OperandInfo& o) {
  return std::accumulate(o.shape.begin(), o.shape.end(), 1.0, [](double a, std::int64_t d) { return a * d; });
}
double bytes(const OperandInfo& o) { return numel(o) * static_cast<double>(device::logicalSize(o.dtype)); }
std::int64_t dim(const OperandInfo& o, int i) {
  const auto n = static_cast<int>(o.shape.size());
  return o.shape[static_cast<std::size_t>(i < 0 ? n + i : i)];
}

// Vector instructions per element: one for arithmetic and copies; the
// exponential-based ops (softmax, cross-entropy, SiLU, GELU, sigmoid, tanh)
// evaluate a polynomial exp of about 8 instructions plus their own; the
// normalisations two passes (statistics, then scaling).
double instructionsPerElement(std::string_view op) {
  if (op == "softmax" || op == "cross_entropy" || op == "silu" || op == "swiglu" || op == "gelu" || op == "gelu_tanh" ||
      op == "sigmoid" || op == "tanh")
    return 10;
  if (op == "layer_norm" || op == "rms_norm" || op == "batch_norm") return 4;
  if (op == "rotary_embedding") return 3;
  return 1;
}

// A product runs on the matrix engine, or, when its output tiles would
// leave the engine's arrays mostly empty (a batched matrix-vector product,
// as decoding's attention), as multiply-adds on the vector engine:
// whichever is faster.
OpCost product(const device::GaudiModel& m, std::int64_t batch, std::int64_t rows, std::int64_t cols,
               std::int64_t inner, DType dtype) {
  // fp8 products write bf16 (the fp8 GEMM's output).
  const DType out = device::isFp8(dtype) ? DType::kBFloat16 : dtype;
  const double b = static_cast<double>(batch), r = static_cast<double>(rows), c = static_cast<double>(cols),
               k = static_cast<double>(inner);
  const double flops = 2.0 * b * r * c * k;
  const double bytes = b * ((r * k + k * c) * static_cast<double>(device::logicalSize(dtype)) +
                            r * c * static_cast<double>(device::logicalSize(out)));
  const double vector = m.vectorSeconds(bytes, flops / 2, 1, dtype == DType::kFloat32 ? dtype : DType::kBFloat16);
  return {Engine::kMatrix, std::min(m.matrixSeconds(batch, rows, cols, inner, dtype, out), vector), flops};
}

}  // namespace

OpCost forwardCost(const device::GaudiModel& m, std::string_view op, std::span<const OperandInfo> operands) {
  if (operands.empty()) return {};
  const OperandInfo& a = operands[0];
  if ((op == "linear" || op == "fp8_linear") && operands.size() >= 2) {
    // x [..., in] by w [out, in] (or [in, out], Conv1D's layout).
    const OperandInfo& w = operands[1];
    const std::int64_t in = dim(a, -1), out = dim(w, 1) == in ? dim(w, 0) : dim(w, 1);
    return product(m, 1, static_cast<std::int64_t>(numel(a)) / std::max<std::int64_t>(1, in), out, in, a.dtype);
  }
  if (op == "matmul" && operands.size() >= 2) {
    // [..., m, k] by [..., k, n]: the shared dimension is k, whichever side
    // of each operand it sits on (transposed operands).
    const OperandInfo& b = operands[1];
    const std::int64_t k = dim(a, -1) == dim(b, -2) || dim(a, -1) == dim(b, -1) ? dim(a, -1) : dim(a, -2);
    const std::int64_t rows = dim(a, -1) == k ? dim(a, -2) : dim(a, -1);
    const std::int64_t cols = dim(b, -2) == k ? dim(b, -1) : dim(b, -2);
    const double batch = std::max(numel(a) / (rows * k), numel(b) / (k * cols));
    return product(m, static_cast<std::int64_t>(batch), rows, cols, k, a.dtype);
  }
  if (op == "conv2d" && operands.size() >= 3) {
    // Implicit GEMM: [N x Ho x Wo, C x kh x kw] by [.., O]; the output
    // [N, O, Ho, Wo] is the record's last operand.
    const OperandInfo& w = operands[1];
    const OperandInfo& y = operands.back();
    const std::int64_t pixels = dim(y, 0) * dim(y, 2) * dim(y, 3);
    return product(m, 1, pixels, dim(w, 0), dim(w, 1) * dim(w, 2) * dim(w, 3), a.dtype);
  }
  if (op == "scaled_dot_product_attention" && operands.size() >= 3) {
    // q [B, H, T, D] with k, v [B, Hkv, S, D]: Q K^T and P V. Decoders are
    // causal where T == S, and a fused kernel skips the masked half;
    // decoding (T < S) reads the whole cache as static-shape HPU graphs do.
    const OperandInfo& k = operands[1];
    // An fp8 cache runs both products in fp8.
    const std::int64_t b = dim(a, 0), h = dim(a, 1), t = dim(a, 2), d = dim(a, 3), s = dim(k, 2);
    OpCost c = product(m, b * h, t, s, d, device::isFp8(k.dtype) ? k.dtype : a.dtype);
    c.seconds *= 2;
    c.flops *= 2;
    if (t == s && t > 1) {
      c.seconds /= 2;
      c.flops /= 2;
    }
    return c;
  }
  if (op == "kv_cache_update" && operands.size() >= 2) {
    // Writes the step's keys or values into their rows of the cache.
    return {Engine::kVector, m.vectorSeconds(2 * bytes(a), numel(a), 1, a.dtype), 0};
  }
  if (op == "narrow" && operands.size() >= 2) {
    // Copies the slice (recorded second) out of the input.
    return {Engine::kVector, m.vectorSeconds(2 * bytes(operands[1]), numel(operands[1]), 1, operands[1].dtype), 0};
  }
  if (op == "h2d") {
    double total = 0;
    for (const OperandInfo& o : operands) total += bytes(o);
    return {Engine::kHostLink, m.hostLinkSeconds(total), 0};
  }
  if (op == "optimizer_step" || op == "optimizer_step_host") {
    // Reads values, gradients and state; writes values and state.
    const double values = bytes(operands[0]), grads = operands.size() > 1 ? bytes(operands[1]) : 0,
                 state = operands.size() > 2 ? bytes(operands[2]) : 0;
    const double traffic = 2 * values + grads + 2 * state;
    if (op == "optimizer_step")
      return {Engine::kOptimizer, m.vectorSeconds(traffic, numel(operands[0]), 8, DType::kFloat32), 0};
    // ZeRO-Offload: gradients down and values up the host link, the update
    // in host memory.
    return {Engine::kOffload, m.hostLinkSeconds(grads) + m.hostLinkSeconds(values) + m.hostMemorySeconds(traffic), 0};
  }
  // A vector pass: reads every operand, writes an output the size of the
  // largest (an embedding's rows: indices x row width).
  double in_bytes = 0, out_elements = 0;
  for (const OperandInfo& o : operands) {
    in_bytes += bytes(o);
    out_elements = std::max(out_elements, numel(o));
  }
  if (op == "embedding" && operands.size() >= 2) {
    out_elements = numel(operands[0]) * static_cast<double>(dim(operands[1], -1));
    in_bytes = bytes(operands[0]) + out_elements * static_cast<double>(device::logicalSize(operands[1].dtype));
  }
  const DType dtype = operands.size() > 1 && op == "embedding" ? operands[1].dtype : a.dtype;
  const double out_bytes = out_elements * static_cast<double>(device::logicalSize(dtype));
  return {Engine::kVector, m.vectorSeconds(in_bytes + out_bytes, out_elements, instructionsPerElement(op), dtype), 0};
}

OpCost backwardCost(std::string_view op, const OpCost& forward) {
  OpCost c = forward;
  if (forward.engine == Engine::kMatrix) {
    // dX and dW: two products of the forward's size; attention recomputes
    // Q K^T and does dV, dP, dQ, dK: five against the forward's two.
    const double factor = op == "scaled_dot_product_attention" ? 2.5 : 2.0;
    c.seconds *= factor;
    c.flops *= factor;
    return c;
  }
  if (forward.engine == Engine::kVector) {
    // Reads the output's gradient and the saved input, writes the input's
    // gradient: three tensor passes against the forward's two.
    c.seconds *= 1.5;
    return c;
  }
  return {};  // copies and optimizer steps have no backward
}

}  // namespace hpu::core::estimate
