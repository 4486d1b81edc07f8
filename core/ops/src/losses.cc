// Losses, and the accuracy count of classifiers.
#include <memory>
#include <vector>

#include "hpu/core/ops/ops.h"
#include "hpu/device/kernels/loss.h"
#include "op_support.h"

namespace hpu::core::ops {

using namespace detail;
namespace k = device::kernels;

Tensor crossEntropy(const Tensor& logits_in, const Tensor& labels, float label_smoothing) {
  require(logits_in.ndim() == 2 && labels.dtype() == DType::kInt64 && labels.numel() == logits_in.size(0),
          op::kCrossEntropy,
          fmt::format("expects logits [N, C] and int64 labels [N], got {} and {}", logits_in.shape().str(),
                      labels.shape().str()));
  const Tensor logits = castTo(logits_in, computeDtype(op::kCrossEntropy, {&logits_in}));
  const OpRecord op_record = record(op::kCrossEntropy, {&logits, &labels});
  const std::int64_t n = logits.size(0), c = logits.size(1);
  auto probs = std::make_shared<std::vector<float>>();  // softmax rows, kept for backward
  double value = 0;
  if (computes(logits)) {
    for (std::int64_t r = 0; r < n; ++r)
      if (labels.labels()[r] < 0 || labels.labels()[r] >= c)
        throw Error(
            fmt::format("cross_entropy: label {} of sample {} is outside the {} classes", labels.labels()[r], r, c));
    probs->resize(static_cast<std::size_t>(n * c));
    value = k::softmaxCrossEntropyForward(logits.data(), labels.labels(), n, c, label_smoothing, probs->data());
  }
  Tensor loss = scalar(logits.device(), value);
  recordBackward(loss, {&logits}, [logits, labels, loss, probs, n, c, label_smoothing] {
    Tensor gl = loss.grad();
    if (!gl.defined()) return;
    GradTarget g = gradTarget(logits);
    if (g.data != nullptr)
      k::softmaxCrossEntropyBackward(probs->data(), labels.labels(), n, c, label_smoothing,
                                     gl.item() / static_cast<float>(n), g.data, g.accumulate);
    gradWritten(logits);
  });
  return loss;
}

Tensor mseLoss(const Tensor& p_in, const Tensor& t_in) {
  require(p_in.shape() == t_in.shape(), op::kMseLoss,
          fmt::format("shapes {} and {} differ", p_in.shape().str(), t_in.shape().str()));
  const DType dt = computeDtype(op::kMseLoss, {&p_in, &t_in});
  const Tensor prediction = castTo(p_in, dt), target = castTo(t_in, dt);
  const OpRecord op_record = record(op::kMseLoss, {&prediction, &target});
  const std::int64_t n = prediction.numel();
  Tensor loss = scalar(prediction.device(),
                       computes(prediction) ? k::mseForward(prediction.data(), target.data(), n) : 0.0);
  recordBackward(loss, {&prediction, &target}, [prediction, target, loss, n] {
    Tensor gl = loss.grad();
    if (!gl.defined()) return;
    auto grad = [&](const Tensor& t, float sign) {
      if (!t.requiresGrad()) return;
      GradTarget g = gradTarget(t);
      if (g.data != nullptr) {
        const float scale = 2.0f * gl.item() / static_cast<float>(n);
        const float *p = prediction.data(), *q = target.data();
        for (std::int64_t i = 0; i < n; ++i) {
          const float d = sign * scale * (p[i] - q[i]);
          g.data[i] = g.accumulate ? g.data[i] + d : d;
        }
      }
      gradWritten(t);
    };
    grad(prediction, 1.0f);
    grad(target, -1.0f);
  });
  return loss;
}

std::int64_t countCorrect(const Tensor& logits, const Tensor& labels) {
  if (!computes(logits)) return 0;
  const std::int64_t n = logits.size(0);
  return k::countArgmaxMatches(logits.data(), labels.labels(), n, logits.numel() / n);
}

}  // namespace hpu::core::ops
