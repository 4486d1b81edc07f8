// Losses, and the accuracy count of classifiers.
#include <memory>
#include <vector>

#include "hpu/core/ops/ops.h"
#include "hpu/device/kernels/loss.h"
#include "op_support.h"

namespace hpu::core::ops {

using namespace detail;
namespace k = device::kernels;

Tensor crossEntropy(const Tensor& logits_in, const Tensor& labels, const CrossEntropyOptions& o) {
  require(logits_in.ndim() >= 2 && labels.dtype() == DType::kInt64 &&
              labels.numel() * logits_in.size(-1) == logits_in.numel(),
          op::kCrossEntropy, [&] {
            return fmt::format("expects logits [..., C] and int64 labels [...] (one per row), got {} and {}",
                               logits_in.shape().str(), labels.shape().str());
          });
  const Tensor logits = castTo(logits_in, computeDtype(op::kCrossEntropy, {&logits_in}));
  const OpRecord op_record = record(op::kCrossEntropy, {&logits, &labels});
  const std::int64_t stride = logits.size(-1), n = logits.numel() / stride;
  require(o.classes >= 0 && o.classes <= stride, op::kCrossEntropy,
          [&] { return fmt::format("{} classes in logits of {} columns", o.classes, stride); });
  const std::int64_t c = o.classes > 0 ? o.classes : stride;
  Tensor lse = Tensor::empty(logits.device(), {n});  // one log-sum-exp per row, for backward
  double mean = 0;
  auto counted = std::make_shared<std::int64_t>(n);
  if (computes(logits)) {
    for (std::int64_t r = 0; r < n; ++r) {
      const std::int64_t label = labels.labels()[r];
      if (label != o.ignore_index && (label < 0 || label >= c))
        throw Error(fmt::format("cross_entropy: label {} of sample {} is outside the {} classes", label, r, c));
    }
    const double total = k::crossEntropyForward(logits.data(), labels.labels(), n, c, o.label_smoothing, o.ignore_index,
                                                lse.data(), counted.get(), stride);
    mean = total / static_cast<double>(*counted);  // no counted label: nan, as torch
  }
  Tensor loss = scalar(logits.device(), mean);
  recordBackward(loss, {&logits}, [logits, labels, loss = GradRef(loss), lse, n, c, stride, o, counted] {
    Tensor gl = loss.grad();
    if (!gl.defined()) return;
    GradTarget g = gradTarget(logits);
    if (g.data != nullptr)
      k::crossEntropyBackward(logits.data(), labels.labels(), lse.data(), n, c, o.label_smoothing, o.ignore_index,
                              gl.item() / static_cast<float>(*counted), g.data, g.accumulate, stride);
    gradWritten(logits);
  });
  return loss;
}

Tensor crossEntropy(const Tensor& logits, const Tensor& labels, float label_smoothing) {
  return crossEntropy(logits, labels, CrossEntropyOptions{.label_smoothing = label_smoothing});
}

Tensor mseLoss(const Tensor& p_in, const Tensor& t_in) {
  require(p_in.shape() == t_in.shape(), op::kMseLoss,
          [&] { return fmt::format("shapes {} and {} differ", p_in.shape().str(), t_in.shape().str()); });
  const DType dt = computeDtype(op::kMseLoss, {&p_in, &t_in});
  const Tensor prediction = castTo(p_in, dt), target = castTo(t_in, dt);
  const OpRecord op_record = record(op::kMseLoss, {&prediction, &target});
  const std::int64_t n = prediction.numel();
  Tensor loss =
      scalar(prediction.device(), computes(prediction) ? k::mseForward(prediction.data(), target.data(), n) : 0.0);
  recordBackward(loss, {&prediction, &target}, [prediction, target, loss = GradRef(loss), n] {
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
  const std::int64_t classes = logits.size(logits.ndim() - 1);
  return k::countArgmaxMatches(logits.data(), labels.labels(), logits.numel() / classes, classes);
}

}  // namespace hpu::core::ops
