// Differentiable tensor operations (the functional API models are written
// in). Each op runs its kernel on the inputs' device, records itself in the
// device's lazy-mode graph under its name in the op table (op_table.h), and —
// when a tape is active and an input requires gradients — records its
// backward on the tape. On a shape-only device an op allocates and records
// exactly as on a real one and computes nothing.
//
// Layouts are PyTorch's: features [N, C] / images [N, C, H, W], Linear
// weights [out, in], Conv2d weights [out, in, kh, kw]. Class labels are int64.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hpu/core/base/random.h"
#include "hpu/core/ops/op_table.h"
#include "hpu/core/tensor/op_record.h"
#include "hpu/core/tensor/tensor.h"
#include "hpu/device/kernels/norm.h"

namespace hpu::core::ops {

// y = x W^T + b. x [N, in] (or [..., in]), w [out, in], b [out] or undefined.
// With weight_in_out, w is [in, out] and y = x W + b (Hugging Face's Conv1D,
// GPT-2's layout).
struct LinearOptions {
  bool weight_in_out = false;
};
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b, const LinearOptions& o = {});
// relu(linear(x, w, b, o)), then, with `dropout`, dropout(., p, training,
// *rng): the same values, gradients, records and draws from rng. The bias
// and the ReLU are applied by the GEMM to each block of y as it finishes,
// the dropout (in float32) in place after it; the backward masks the
// output gradient once, for both, for the three products.
struct FusedDropout {
  float p;
  bool training;
  Generator* rng;
};
Tensor linearRelu(const Tensor& x, const Tensor& w, const Tensor& b, const LinearOptions& o = {},
                  std::optional<FusedDropout> dropout = std::nullopt);
// torch.matmul on matrices: op(a) [..., M, K] @ op(b) [..., K, N] ->
// [..., M, N], where op transposes the last two dimensions when asked; the
// batch dimensions (all but the last two) broadcast as in torch.
struct MatmulOptions {
  bool transpose_a = false;
  bool transpose_b = false;
  // > 0: only the first b_rows rows of each of B's matrices are read (a KV
  // cache's filled rows, or its bucket: [..., S, D] read as [..., b_rows, D],
  // no copy); B then gets no gradient. -1: all.
  std::int64_t b_rows = -1;
};
Tensor matmul(const Tensor& a, const Tensor& b, const MatmulOptions& o = {});

struct Conv2dOptions {
  std::int64_t stride = 1;
  std::int64_t padding = 0;
};
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dOptions& o = {});

struct Pool2dOptions {
  std::int64_t kernel = 2;
  std::int64_t stride = 0;  // 0: = kernel
  std::int64_t padding = 0;
};
Tensor maxPool2d(const Tensor& x, const Pool2dOptions& o);
Tensor avgPool2d(const Tensor& x, const Pool2dOptions& o);
// maxPool2d(conv2d(x, w, b, o), {.kernel = 2}): the same values, gradients,
// records and errors. In float32 one kernel pools each chunk of images
// while its convolution is in cache: the convolution's output and its
// gradient are never stored (nor allocated on the device).
Tensor conv2dMaxPool(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dOptions& o = {});

Tensor relu(const Tensor& x);
// x * sigmoid(x).
Tensor silu(const Tensor& x);
// silu(gate) * up, elementwise (Llama's MLP); equal shapes.
Tensor swiglu(const Tensor& gate, const Tensor& up);
// The same, the gate given as a temporary: when no backward is recorded and
// nothing else holds the gate (Tensor::soleOwner), the output takes the
// gate's memory instead of new memory (inference: the MLP's widest tensor,
// at the prefill's peak, is then never allocated twice).
Tensor swiglu(Tensor&& gate, const Tensor& up);
// approximate: false = exact (erf), true = tanh approximation.
Tensor gelu(const Tensor& x, bool approximate = false);
Tensor tanh(const Tensor& x);
// cap * tanh(x / cap), elementwise (Gemma 2's final_logit_softcapping).
Tensor softcap(const Tensor& x, float cap);
Tensor sigmoid(const Tensor& x);
// Zeroes elements with probability p and scales the rest by 1/(1-p) when
// `training`; identity otherwise. With `part`, x [B, T, ...] holds
// positions [part.first, part.first + T) of a sequence of part.whole, and
// gets the masks a tensor of the whole sequence would (sequence
// parallelism: every rank draws its part of one mask).
struct SequencePart {
  std::int64_t first = 0, whole = 0;  // whole 0: x is whole
};
Tensor dropout(const Tensor& x, float p, bool training, Generator& rng, SequencePart part = {});

// Same data, new shape (differentiable).
Tensor reshape(const Tensor& x, const Shape& shape);
// x with its dimensions reordered (output dimension i is x's perm[i]), as a
// contiguous copy; negative entries count from the end.
Tensor permute(const Tensor& x, std::span<const int> perm);
Tensor permute(const Tensor& x, std::initializer_list<int> perm);
// x with dimensions d0 and d1 swapped (a contiguous copy).
Tensor transpose(const Tensor& x, int d0, int d1);
// x split along its last dimension into pieces of `sizes` (copies; they add
// up to x's last dimension): GPT-2's fused q, k, v projection.
std::vector<Tensor> split(const Tensor& x, std::span<const std::int64_t> sizes);
// The rows of every tensor of xs ([n_i, ...], all alike but for n_i) one
// after another: [sum of n_i, ...] (a copy; each gradient its rows back).
Tensor concatRows(std::span<const Tensor> xs);
// Positions start .. start + length - 1 of x's dimension `dim` (a copy;
// torch.narrow): the last position's hidden state, for the next token.
Tensor narrow(const Tensor& x, int dim, std::int64_t start, std::int64_t length);
// [B, T, heads * D] -> [B, heads, T, D], and back.
Tensor splitHeads(const Tensor& x, std::int64_t heads);
Tensor mergeHeads(const Tensor& x);
// Collapses dims [start_dim, end] into one.
Tensor flatten(const Tensor& x, int start_dim = 1);

// Over the last dimension; weight/bias [D] or undefined.
Tensor layerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps = 1e-5f);
// Llama's RMSNorm over the last dimension: weight * x / sqrt(mean(x^2) + eps);
// weight [D] or undefined.
Tensor rmsNorm(const Tensor& x, const Tensor& weight, float eps = 1e-6f);

// Hugging Face's rope_scaling: how rotary embeddings' inverse frequencies
// are rescaled for a context longer than the one trained at.
struct RopeScaling {
  enum class Type { kNone, kLinear, kLlama3 };
  Type type = Type::kNone;
  // linear: every frequency divided by it; llama3: those of wavelengths
  // above original_max_position_embeddings / low_freq_factor divided by it,
  // those below original_max_position_embeddings / high_freq_factor kept,
  // a smooth blend between.
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  std::int64_t original_max_position_embeddings = 8192;
};
// The D/2 inverse frequencies 1 / theta^(2i / D), rescaled, in float32 as
// Hugging Face's rope initialisation functions compute them.
std::vector<float> ropeInverseFrequencies(std::int64_t d, float theta, const RopeScaling& scaling = {});

// Rotary position embedding of x [..., T, D] (Hugging Face's rotate-half
// layout, float32 angles position * inv_freq_i); positions int64 [T].
Tensor rotaryEmbedding(const Tensor& x, const Tensor& positions, float theta = 10000.0f,
                       const RopeScaling& scaling = {});
// splitHeads(x, heads) and then rotaryEmbedding in one pass: x [B, T, heads *
// D] (a projection's output) -> rotated [B, heads, T, D].
Tensor splitHeadsRotary(const Tensor& x, std::int64_t heads, const Tensor& positions, float theta = 10000.0f,
                        const RopeScaling& scaling = {});

// softmax(q k^T * scale + mask) v for q [B, H, T, D] and k, v [B, Hkv, S, D]
// (H a multiple of Hkv: grouped-query attention, query head h reads key/value
// head h / (H / Hkv)), without materialising the [T, S] scores (see
// device/kernels/attention.h): the device keeps the output and one float per
// query row. The causal mask aligns the T queries with the last T of the keys
// used, so a decoding step over a KV cache masks correctly.
struct AttentionOptions {
  bool causal = true;
  std::optional<float> scale;       // default 1 / sqrt(D)
  std::int64_t sliding_window = 0;  // > 0: a query sees only the last `sliding_window` keys (Mistral)
  float dropout_p = 0.0f;           // dropout on the probabilities, when `training`
  bool training = false;
  Generator* rng = nullptr;     // dropout's masks: one draw per call (REQUIRES: set with dropout)
  std::int64_t kv_length = -1;  // keys used per head (a KV cache's filled part; -1: all S)
  // Keys per head the op's graph reads (static shapes: a whole cache, or its
  // bucket), at least kv_length; -1: all S. What the lazy graph and the
  // estimate see; the result depends on kv_length alone.
  std::int64_t kv_graph_length = -1;
  // q's heads are heads [head_offset, head_offset + heads) of a layer of
  // all_heads (a tensor-parallel rank's): dropout drops what it would in
  // the whole layer. 0: all_heads = q's heads.
  std::int64_t head_offset = 0, all_heads = 0;
  // transformers' attn_implementation "eager": the scores materialised as
  // they are without a fused kernel (a matmul, attentionSoftmax, a matmul,
  // each recorded, differentiated and in device memory: [B, H, T, S] scores
  // and probabilities), dropout on the probabilities with ops::dropout;
  // false: one fused FlashAttention kernel ("sdpa"). The same function.
  bool eager = false;
  // > 0: each score s (scaled) becomes softcap * tanh(s / softcap) before the
  // mask and the softmax (Gemma 2's attn_logit_softcapping). The fused kernel
  // has none, so soft-capped attention materialises its scores (as
  // transformers, whose Gemma 2 has no sdpa either).
  float softcap = 0.0f;
};
Tensor scaledDotProductAttention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o = {});

// x [N, C, H, W]; running stats [C] are updated in training (momentum as
// torch: new = (1 - momentum) * old + momentum * batch, unbiased variance).
// Inside a SyncBatchNormScope, training's batch statistics (and backward's)
// are those of every rank's batch together (torch's SyncBatchNorm).
Tensor batchNorm2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& running_mean, Tensor& running_var,
                   bool training, float momentum = 0.1f, float eps = 1e-5f);

// trainer.sync_batchnorm: while alive on a thread, batch norms in training
// sum their per-channel statistics across ranks with `sum` (an all-reduce
// every rank calls in the same order).
class SyncBatchNormScope {
 public:
  explicit SyncBatchNormScope(device::kernels::ChannelSums sum);
  ~SyncBatchNormScope();
  SyncBatchNormScope(const SyncBatchNormScope&) = delete;
  SyncBatchNormScope& operator=(const SyncBatchNormScope&) = delete;

 private:
  device::kernels::ChannelSums previous_;
};

// indices int64 [...], weight [num, dim] -> [..., dim]. The row
// `padding_idx` (if given) receives no gradient, as torch's.
Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<std::int64_t> padding_idx = std::nullopt);

// Mean cross-entropy of logits [..., C] against int64 labels [...] over the
// labels that are not ignore_index (PyTorch's, with its label smoothing; a
// language model's targets are [B, T] against logits [B, T, V]). The device
// keeps one float per row for backward, not the probabilities.
struct CrossEntropyOptions {
  float label_smoothing = 0.0f;
  std::int64_t ignore_index = -100;
  // > 0: the classes are the first `classes` columns of the logits; the
  // others (a padded vocabulary's rows) take no probability, as logits of
  // -inf would, and get a zero gradient. 0: every column is a class.
  std::int64_t classes = 0;
};
Tensor crossEntropy(const Tensor& logits, const Tensor& labels, const CrossEntropyOptions& o);
Tensor crossEntropy(const Tensor& logits, const Tensor& labels, float label_smoothing = 0.0f);
// Mean squared error.
Tensor mseLoss(const Tensor& prediction, const Tensor& target);

// Mixture of experts (Mixtral's sparse MoE block: dropless, each token's
// rows computed by its top-k experts and summed with the router's weights).
//
// The top k of each row of router probabilities probs [N, E]: the experts
// (row-major [N, k], the most probable first, ties to the lower expert, as
// torch.topk) and their weights [N, k] (fp32), divided by their sum when
// `normalize`. The weights are differentiable in probs. A shape-only device
// has no probabilities: token n's j-th choice is then expert (n k + j) mod E,
// every expert receiving the same number of rows (the balanced routing the
// estimate assumes).
struct TopKRouting {
  Tensor weights;
  std::vector<std::int64_t> experts;
};
TopKRouting routerTopK(const Tensor& probs, std::int64_t k, bool normalize);
// The rows of x [N, H] each expert reads: out[e] = x[rows[e]], [rows[e].size(), H]
// (gradients add back into x's rows).
std::vector<Tensor> dispatchRows(const Tensor& x, std::span<const std::vector<std::int64_t>> rows);
// The tokens' outputs [n, H]: row r is the sum, over experts e (in order) and
// their rows i with rows[e][i] == r, of weights.flat[slots[e][i]] * ys[e][i].
// Differentiable in every ys[e] and in weights.
Tensor combineRows(std::span<const Tensor> ys, std::span<const std::vector<std::int64_t>> rows,
                   std::span<const std::vector<std::int64_t>> slots, const Tensor& weights, std::int64_t n);
// x itself (the same values, no copy); in backward, each row of x's
// gradient also receives `row_gradient` (x's last dimension), read when the
// backward runs: a loss term's gradient that depends on every layer's
// routing, handed in after the forward (Mixtral's load-balancing loss; see
// addScalarTerm).
Tensor withRowGradient(const Tensor& x, std::shared_ptr<const std::vector<float>> row_gradient);
// loss + value (a scalar); in backward, loss receives the result's gradient
// and `on_gradient` is told its value before any earlier op's backward runs
// (the term's own gradient reaches its inputs through withRowGradient).
Tensor addScalarTerm(const Tensor& loss, double value, std::function<void(float)> on_gradient);

Tensor add(const Tensor& a, const Tensor& b);
// The same, b given as a temporary (a residual connection's branch): when no
// backward is recorded and nothing else holds b (Tensor::soleOwner), the sum
// takes b's memory (inference: the prefill's [batch, prompt, hidden] stream
// is then not allocated a third time at each residual add).
Tensor add(const Tensor& a, Tensor&& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& a, float s);
Tensor sum(const Tensor& a);
Tensor mean(const Tensor& a);
Tensor softmax(const Tensor& logits);  // over the last dimension

// Eager attention's softmax: scores [..., T, S] of T queries at positions
// kv_length - T .. kv_length - 1 against keys at 0 .. S - 1 (T rows per
// batch-and-head item; grouped-query layouts stack several heads' T rows)
// give softmax(scale * scores) over each row, with the keys a query may not
// see at probability 0: from kv_length on, (causal) after the query's
// position, (sliding_window > 0) sliding_window or more positions before it.
// The scaling and the mask run in the softmax's pass, as a graph compiler
// fuses them. Every query must see a key.
struct AttentionMask {
  std::int64_t queries = 1;     // T
  std::int64_t kv_length = -1;  // -1: S
  bool causal = true;
  std::int64_t sliding_window = 0;
  float scale = 1.0f;
  float softcap = 0.0f;  // > 0: scale * score is capped to softcap * tanh(scale * score / softcap)
};
Tensor attentionSoftmax(const Tensor& scores, const AttentionMask& mask);

// Activation checkpointing (DeepSpeed's checkpoint / torch.utils.checkpoint):
// runs f(x) without keeping its activations and recomputes them in backward.
// `rng`, if given, is rewound for the recomputation so dropout draws the same
// masks; `on_host` keeps the saved input in host memory instead of on the
// device (DeepSpeed's cpu_checkpointing).
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& f, const Tensor& x, Generator* rng = nullptr,
                  bool on_host = false);
// The same for a function of several inputs, each saved and given its gradient.
Tensor checkpoint(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& xs,
                  Generator* rng = nullptr, bool on_host = false);

// Not differentiable: for logits [..., C] and labels [...], the number of
// positions whose arg-max over C equals the label.
std::int64_t countCorrect(const Tensor& logits, const Tensor& labels);

}  // namespace hpu::core::ops
