#include "hpu/core/estimate/op_costs.h"

#include <algorithm>
#include <numeric>

namespace hpu::core::estimate {
namespace {

using device::DType;
using device::OperandInfo;

// Vector instructions per element: one for arithmetic and copies; the
// exponential-based ops (softmax, cross-entropy, SiLU, GELU, sigmoid, tanh)
// evaluate a polynomial exp of about 8 instructions plus their own; the
// normalisations two passes (statistics, then scaling); rotary embeddings a
// multiply-add per half and the sign. Assumed from the TPC's instruction set
// (one 256-byte vector op per cycle, no transcendental unit).
constexpr double kExpOpInstructions = 10;
constexpr double kNormInstructions = 4;
constexpr double kRotaryInstructions = 3;
// Attention's backward per score: the softmax recomputed from the kept
// log-sum-exp (as its forward), then dS = P * (dP - rowsum(dO * O)): two more.
constexpr double kAttentionBackwardExtraInstructions = 2;
// FlashAttention's backward does five products (S = QK^T again, dV, dP, dQ,
// dK) against the forward's two.
constexpr double kAttentionBackwardProducts = 5.0 / 2.0;
// A vector op's backward reads the output's gradient and the saved input and
// writes the input's gradient: three tensor passes against the forward's two.
constexpr double kVectorBackwardPasses = 3.0 / 2.0;

double instructionsPerElement(std::string_view op) {
  if (op == "softmax" || op == "attention_softmax" || op == "cross_entropy" || op == "silu" || op == "swiglu" ||
      op == "gelu" || op == "gelu_tanh" || op == "sigmoid" || op == "tanh" || op == "softcap")
    return kExpOpInstructions;
  if (op == "layer_norm" || op == "rms_norm" || op == "batch_norm") return kNormInstructions;
  if (op == "rotary_embedding") return kRotaryInstructions;
  return 1;
}

double numel(const OperandInfo& o) {
  return std::accumulate(o.shape.begin(), o.shape.end(), 1.0, [](double a, std::int64_t d) { return a * d; });
}
double bytes(const OperandInfo& o) { return numel(o) * static_cast<double>(device::logicalSize(o.dtype)); }
std::int64_t dim(const OperandInfo& o, int i) {
  const auto n = static_cast<int>(o.shape.size());
  return o.shape[static_cast<std::size_t>(i < 0 ? n + i : i)];
}
// The dtype vector code computes in: fp32 stays, half values are processed
// as bf16.
DType vectorDtype(DType t) { return t == DType::kFloat32 ? t : DType::kBFloat16; }
// The dtype a product's multiply-adds run in on the TPCs: an fp8 product in
// 8-bit lanes, 256 a cycle per TPC against bf16's 128 (TPC User Guide: "the
// TPC's ALU can execute up to 64 floats/INT32 ops, 128 INT16 ops, or 256
// INT8 ops" a cycle), the others as vector code does. Decoding's attention
// over an fp8 KV cache runs this way.
DType productVectorDtype(DType t) { return device::isFp8(t) ? t : vectorDtype(t); }

// `work` priced by `m`, on `engine`.
OpCost costOf(const device::GaudiModel& m, Engine engine, const device::Work& work, double flops = 0) {
  return {engine, m.seconds(work), flops, work};
}

// `work` done `times` over.
device::Work times(device::Work w, double times) {
  w.mme *= times;
  w.tpc *= times;
  w.hbm *= times;
  w.host_link *= times;
  w.host_memory *= times;
  return w;
}

// The work of `batch` products [rows, inner] x [inner, cols] on either
// engine: output tiles on the matrix engine, or multiply-adds on the vector
// engine.
struct ProductWork {
  device::Work matrix, vector;
  double flops = 0;
};

ProductWork productWork(const device::GaudiModel& m, std::int64_t batch, std::int64_t rows, std::int64_t cols,
                        std::int64_t inner, DType dtype) {
  // fp8 products write bf16 (the fp8 GEMM's output).
  const DType out = device::isFp8(dtype) ? DType::kBFloat16 : dtype;
  const double b = static_cast<double>(batch), r = static_cast<double>(rows), c = static_cast<double>(cols),
               k = static_cast<double>(inner);
  const double flops = 2.0 * b * r * c * k;
  const double traffic = b * ((r * k + k * c) * static_cast<double>(device::logicalSize(dtype)) +
                              r * c * static_cast<double>(device::logicalSize(out)));
  return {m.matrixWork(batch, rows, cols, inner, dtype, out),
          m.vectorWork(traffic, flops / 2, 1, productVectorDtype(dtype)), flops};
}

// `batch` products on the matrix engine, or, when its output tiles would
// leave the engine's arrays mostly empty (a batched matrix-vector product),
// on the vector engine: whichever is faster.
OpCost product(const device::GaudiModel& m, std::int64_t batch, std::int64_t rows, std::int64_t cols,
               std::int64_t inner, DType dtype) {
  const ProductWork w = productWork(m, batch, rows, cols, inner, dtype);
  return m.seconds(w.matrix) <= m.seconds(w.vector) ? costOf(m, Engine::kMatrix, w.matrix, w.flops)
                                                     : costOf(m, Engine::kVector, w.vector, w.flops);
}

// The backward of a product of a and b: dA and dB, a product of the
// forward's size each, for those of the two the tape differentiates (a
// frozen weight gets no gradient; a model's input none either).
OpCost productBackward(const OpCost& forward, const OperandInfo& a, const OperandInfo& b) {
  const double products = std::max(1, static_cast<int>(a.requires_grad) + static_cast<int>(b.requires_grad));
  return {forward.engine, products * forward.seconds, products * forward.flops, times(forward.work, products)};
}

// Attention as one fused FlashAttention kernel over q [B, H, T, D] and k, v
// [B, Hkv, S, D] as its graph reads them (decoding: the whole KV cache, or
// its bucket): Q K^T and P V (the query heads of a
// key/value head as the rows of one product, as grouped-query kernels lay
// them out; causal prefill skips the masked half), the softmax of every
// score on the vector engine, and q, k, v and the output through HBM once
// (the scores stay on chip). Its engines work on successive blocks at once,
// so the kernel takes as long as the busiest of them and HBM. The kernel
// runs both products on one engine: it is priced whole with them on the
// matrix engine and whole with them on the vector engine (a few query rows
// against a long cache, decoding), and takes the faster.
OpPrice attention(const device::GaudiModel& m, std::span<const OperandInfo> operands) {
  const OperandInfo &q = operands[0], &k = operands[1];
  const std::int64_t b = dim(q, 0), h = dim(q, 1), t = dim(q, 2), d = dim(q, 3), hkv = dim(k, 1), s = dim(k, 2);
  const std::int64_t group = std::max<std::int64_t>(1, h / std::max<std::int64_t>(1, hkv));
  const double masked = t == s && t > 1 ? 0.5 : 1.0;  // causal prefill
  // An fp8 cache runs both products in fp8.
  const DType dtype = device::isFp8(k.dtype) ? k.dtype : q.dtype;
  const double scores = static_cast<double>(b * h * t) * static_cast<double>(s) * masked;
  const ProductWork qk = productWork(m, b * hkv, group * t, s, d, dtype), pv = productWork(m, b * hkv, group * t, d, s, dtype);
  const double flops = (qk.flops + pv.flops) * masked;
  const DType vdt = vectorDtype(q.dtype);
  const double kv_bytes = static_cast<double>(b * hkv * s * d) * static_cast<double>(device::logicalSize(k.dtype));
  // The products on the matrix engine beside the softmax (the scores stay
  // on chip: HBM moves q, k, v and the output once), or everything on the
  // vector engine.
  const auto kernel = [&](bool on_matrix, double products, double softmax_instructions, double traffic) {
    device::Work w = m.vectorWork(traffic, scores, softmax_instructions, vdt);
    if (on_matrix) {
      w.mme = products * (qk.matrix.mme + pv.matrix.mme) * masked;
      w.matrix = device::Work::Matrix::kAttention;
    } else {
      w.tpc += products * (qk.vector.tpc + pv.vector.tpc) * masked;
    }
    return w;
  };
  // The faster of the whole kernel on either engine, forward and backward alike.
  const auto faster = [&](double products, double softmax_instructions, double traffic, double op_flops) {
    const device::Work matrix = kernel(true, products, softmax_instructions, traffic);
    const device::Work vector = kernel(false, products, softmax_instructions, traffic);
    return m.seconds(matrix) <= m.seconds(vector) ? costOf(m, Engine::kMatrix, matrix, op_flops)
                                                   : costOf(m, Engine::kVector, vector, op_flops);
  };
  OpPrice p;
  p.forward = faster(1, kExpOpInstructions, 2 * bytes(q) + 2 * kv_bytes, flops);
  // Backward reads q, k, v, the output and its gradient and writes three
  // gradients: twice the forward's traffic.
  p.backward = faster(kAttentionBackwardProducts, kExpOpInstructions + kAttentionBackwardExtraInstructions,
                      2 * (2 * bytes(q) + 2 * kv_bytes), flops * kAttentionBackwardProducts);
  return p;
}

OpCost vectorPass(const device::GaudiModel& m, std::string_view op, std::span<const OperandInfo> operands) {
  // Reads every operand, writes an output the size of the largest (an
  // embedding's rows: indices x row width).
  double in_bytes = 0, out_elements = 0;
  for (const OperandInfo& o : operands) {
    in_bytes += bytes(o);
    out_elements = std::max(out_elements, numel(o));
  }
  if (op == "embedding" && operands.size() >= 2) {
    out_elements = numel(operands[0]) * static_cast<double>(dim(operands[1], -1));
    in_bytes = bytes(operands[0]) + out_elements * static_cast<double>(device::logicalSize(operands[1].dtype));
  }
  const DType dtype = operands.size() > 1 && op == "embedding" ? operands[1].dtype : operands[0].dtype;
  const double out_bytes = out_elements * static_cast<double>(device::logicalSize(dtype));
  return costOf(m, Engine::kVector, m.vectorWork(in_bytes + out_bytes, out_elements, instructionsPerElement(op), dtype));
}

}  // namespace

OpPrice priceOp(const device::GaudiModel& m, std::string_view op, std::span<const OperandInfo> operands) {
  if (operands.empty()) return {};
  const OperandInfo& a = operands[0];
  const auto withBackward = [&](const OpCost& c) { return OpPrice{c, productBackward(c, a, operands[1])}; };
  if ((op == "linear" || op == "fp8_linear") && operands.size() >= 2) {
    // x [..., in] by w [out, in] (or [in, out], Conv1D's layout).
    const OperandInfo& w = operands[1];
    const std::int64_t in = dim(a, -1), out = dim(w, 1) == in ? dim(w, 0) : dim(w, 1);
    return withBackward(product(m, 1, static_cast<std::int64_t>(numel(a)) / std::max<std::int64_t>(1, in), out, in,
                                a.dtype));
  }
  if (op == "matmul" && operands.size() >= 2) {
    // [..., m, k] by [..., k, n]: the shared dimension is k, whichever side
    // of each operand it sits on (transposed operands).
    const OperandInfo& b = operands[1];
    const std::int64_t k = dim(a, -1) == dim(b, -2) || dim(a, -1) == dim(b, -1) ? dim(a, -1) : dim(a, -2);
    const std::int64_t rows = dim(a, -1) == k ? dim(a, -2) : dim(a, -1);
    const std::int64_t cols = dim(b, -2) == k ? dim(b, -1) : dim(b, -2);
    const double batch = std::max(numel(a) / (rows * k), numel(b) / (k * cols));
    // An fp8 operand (an fp8 KV cache) makes it an fp8 product: fp8
    // quantization quantizes the other.
    const DType dtype = device::isFp8(b.dtype) ? b.dtype : a.dtype;
    return withBackward(product(m, static_cast<std::int64_t>(batch), rows, cols, k, dtype));
  }
  if (op == "conv2d" && operands.size() >= 3) {
    // Implicit GEMM: [N x Ho x Wo, C x kh x kw] by [.., O]; the output
    // [N, O, Ho, Wo] is the record's last operand.
    const OperandInfo& w = operands[1];
    const OperandInfo& y = operands.back();
    const std::int64_t pixels = dim(y, 0) * dim(y, 2) * dim(y, 3);
    return withBackward(product(m, 1, pixels, dim(w, 0), dim(w, 1) * dim(w, 2) * dim(w, 3), a.dtype));
  }
  if (op == "scaled_dot_product_attention" && operands.size() >= 3) return attention(m, operands);
  if (op == "h2d") {
    double total = 0;
    for (const OperandInfo& o : operands) total += bytes(o);
    return {costOf(m, Engine::kHostLink, device::Work{.host_link = m.hostLinkSeconds(total)}), {}};
  }
  if (op == "optimizer_step" || op == "optimizer_step_host") {
    // Reads values, gradients and state; writes values and state.
    const double values = bytes(operands[0]), grads = operands.size() > 1 ? bytes(operands[1]) : 0,
                 state = operands.size() > 2 ? bytes(operands[2]) : 0;
    const double traffic = 2 * values + grads + 2 * state;
    if (op == "optimizer_step")
      return {costOf(m, Engine::kOptimizer, m.vectorWork(traffic, numel(operands[0]), 8, DType::kFloat32)), {}};
    // ZeRO-Offload: gradients down and values up the host link, the update
    // in host memory.
    return {costOf(m, Engine::kOffload,
                   device::Work{.host_link = m.hostLinkSeconds(grads) + m.hostLinkSeconds(values),
                                .host_memory = m.hostMemorySeconds(traffic)}),
            {}};
  }
  OpCost forward = vectorPass(m, op, operands);
  if (op == "kv_cache_update" && operands.size() >= 2)  // the step's keys and values read, written into the cache
    forward = costOf(m, Engine::kVector, m.vectorWork(4 * bytes(a), 2 * numel(a), 1, a.dtype));
  if (op == "kv_cache_pad" && operands.size() >= 2)  // a layer's keys or values read, written into a larger cache
    forward = costOf(m, Engine::kVector,
                     m.vectorWork(bytes(a) + bytes(operands[1]), numel(operands[1]), 1, operands[1].dtype));
  if (op == "narrow" && operands.size() >= 2)  // copies the slice (recorded second) out of the input
    forward = costOf(m, Engine::kVector, m.vectorWork(2 * bytes(operands[1]), numel(operands[1]), 1, operands[1].dtype));
  return {forward, costOf(m, Engine::kVector, times(forward.work, kVectorBackwardPasses))};
}

std::vector<device::Assumption> opCostAssumptions() {
  const char* isa = "assumed from the TPC's ISA: one 256-byte vector op per cycle, exp as a polynomial";
  return {
      {"tpc_instructions_exp_ops", kExpOpInstructions, "per element", isa},
      {"tpc_instructions_norms", kNormInstructions, "per element", isa},
      {"tpc_instructions_rotary", kRotaryInstructions, "per element", isa},
      {"attention_backward_products", kAttentionBackwardProducts, "x forward",
       "FlashAttention-2: five products in backward against two"},
      {"attention_backward_softmax", kExpOpInstructions + kAttentionBackwardExtraInstructions,
       "TPC instructions per score", "softmax recomputed, then dS = P (dP - D)"},
      {"attention_engines_overlap", 1, "boolean",
       "a fused attention kernel pipelines its blocks between MME, TPC and HBM: the busiest one bounds it"},
      {"vector_backward_passes", kVectorBackwardPasses, "x forward", "reads dY and X, writes dX: 3 passes against 2"},
      {"moe_expert_load", 1, "max / mean rows per expert",
       "mixture of experts: a shape-only trace routes every expert the same number of rows (N k / E); a real "
       "router's busiest expert takes more, and the step waits for it"},
  };
}

}  // namespace hpu::core::estimate
