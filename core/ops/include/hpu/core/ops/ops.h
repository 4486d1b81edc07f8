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
#include <string>
#include <vector>

#include "hpu/core/base/random.h"
#include "hpu/core/ops/op_table.h"
#include "hpu/core/tensor/op_record.h"
#include "hpu/core/tensor/tensor.h"

namespace hpu::core::ops {

// y = x W^T + b. x [N, in] (or [..., in]), w [out, in], b [out] or undefined.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b);
// torch.matmul on matrices: op(a) [..., M, K] @ op(b) [..., K, N] ->
// [..., M, N], where op transposes the last two dimensions when asked; the
// batch dimensions (all but the last two) broadcast as in torch.
struct MatmulOptions {
  bool transpose_a = false;
  bool transpose_b = false;
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

Tensor relu(const Tensor& x);
// approximate: false = exact (erf), true = tanh approximation.
Tensor gelu(const Tensor& x, bool approximate = false);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
// Zeroes elements with probability p and scales the rest by 1/(1-p) when
// `training`; identity otherwise.
Tensor dropout(const Tensor& x, float p, bool training, Generator& rng);

// Same data, new shape (differentiable).
Tensor reshape(const Tensor& x, const Shape& shape);
// Collapses dims [start_dim, end] into one.
Tensor flatten(const Tensor& x, int start_dim = 1);

// Over the last dimension; weight/bias [D] or undefined.
Tensor layerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps = 1e-5f);
// x [N, C, H, W]; running stats [C] are updated in training (momentum as
// torch: new = (1 - momentum) * old + momentum * batch, unbiased variance).
Tensor batchNorm2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& running_mean,
                   Tensor& running_var, bool training, float momentum = 0.1f, float eps = 1e-5f);

// indices int64 [...], weight [num, dim] -> [..., dim].
Tensor embedding(const Tensor& indices, const Tensor& weight);

// Mean cross-entropy of logits [N, C] against int64 labels [N], with
// PyTorch's label smoothing.
Tensor crossEntropy(const Tensor& logits, const Tensor& labels, float label_smoothing = 0.0f);
// Mean squared error.
Tensor mseLoss(const Tensor& prediction, const Tensor& target);

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& a, float s);
Tensor sum(const Tensor& a);
Tensor mean(const Tensor& a);
Tensor softmax(const Tensor& logits);  // over the last dimension

// Activation checkpointing (DeepSpeed's checkpoint / torch.utils.checkpoint):
// runs f(x) without keeping its activations and recomputes them in backward.
// `rng`, if given, is rewound for the recomputation so dropout draws the same
// masks; `on_host` keeps the saved input in host memory instead of on the
// device (DeepSpeed's cpu_checkpointing).
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& f, const Tensor& x, Generator* rng = nullptr,
                  bool on_host = false);

// Not differentiable: number of rows whose arg-max equals the label.
std::int64_t countCorrect(const Tensor& logits, const Tensor& labels);

}  // namespace hpu::core::ops
