// Layer, RMS and 2-D batch normalisation.
#include <memory>
#include <vector>

#include "hpu/core/ops/ops.h"
#include "hpu/device/kernels/norm.h"
#include "op_support.h"

namespace hpu::core::ops {

using namespace detail;
namespace k = device::kernels;

Tensor layerNorm(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, float eps) {
  const DType dt = computeDtype(op::kLayerNorm, {&x_in, &w_in, &b_in});
  const Tensor x = castTo(x_in, dt), w = castTo(w_in, dt), b = castTo(b_in, dt);
  const std::int64_t d = x.size(-1), rows = x.numel() / d;
  const OpRecord op_record = record(op::kLayerNorm, {&x, &w, &b});
  Tensor y = like(x, x.shape());
  auto stats = std::make_shared<std::vector<float>>();  // (mean, rstd) per row: the device's workspace
  if (computes(y)) {
    stats->resize(static_cast<std::size_t>(2 * rows));
    k::layerNormForward(x.data(), rows, d, w.defined() ? w.data() : nullptr, b.defined() ? b.data() : nullptr, eps,
                        y.data(), stats->data());
  }
  recordBackward(y, {&x, &w, &b}, [x, w, b = GradRef(b), y = GradRef(y), stats, rows, d] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    const auto [gx, gw, gb] = gradTargets(x, w, b);
    // w and b share accumulation state: both are fresh or both accumulate.
    if (computes(y))
      k::layerNormBackward(x.data(), gy.data(), rows, d, w.defined() ? w.data() : nullptr, stats->data(), gx.data,
                           gx.accumulate, gw.data, gb.data, gw.accumulate || gb.accumulate);
    gradsWritten(x, w, b);
  });
  return finish(y);
}

Tensor rmsNorm(const Tensor& x_in, const Tensor& w_in, float eps) {
  const DType dt = computeDtype(op::kRmsNorm, {&x_in, &w_in});
  const Tensor x = castTo(x_in, dt), w = castTo(w_in, dt);
  require(!w.defined() || (w.ndim() == 1 && w.size(0) == x.size(-1)), op::kRmsNorm,
          [&] { return fmt::format("weight {} does not match input {}", w.shape().str(), x.shape().str()); });
  const std::int64_t d = x.size(-1), rows = x.numel() / d;
  const OpRecord op_record = record(op::kRmsNorm, {&x, &w});
  Tensor y = like(x, x.shape());
  auto rstd = std::make_shared<std::vector<float>>();  // one per row: the device's workspace
  if (computes(y)) {
    rstd->resize(static_cast<std::size_t>(rows));
    k::rmsNormForward(x.data(), rows, d, w.defined() ? w.data() : nullptr, eps, y.data(), rstd->data());
  }
  recordBackward(y, {&x, &w}, [x, w, y = GradRef(y), rstd, rows, d] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    const auto [gx, gw, gb] = gradTargets(x, w, GradRef());
    if (computes(y))
      k::rmsNormBackward(x.data(), gy.data(), rows, d, w.defined() ? w.data() : nullptr, rstd->data(), gx.data,
                         gx.accumulate, gw.data, gw.accumulate);
    gradsWritten(x, w, GradRef());
  });
  return finish(y);
}

namespace {
thread_local k::ChannelSums tls_sync_batchnorm;
}  // namespace

SyncBatchNormScope::SyncBatchNormScope(k::ChannelSums sum) : previous_(std::move(tls_sync_batchnorm)) {
  tls_sync_batchnorm = std::move(sum);
}
SyncBatchNormScope::~SyncBatchNormScope() { tls_sync_batchnorm = std::move(previous_); }

Tensor batchNorm2d(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, Tensor& running_mean,
                   Tensor& running_var, bool training, float momentum, float eps) {
  require(x_in.ndim() == 4, "batch_norm2d", [&] { return "expects [N, C, H, W], got " + x_in.shape().str(); });
  const DType dt = computeDtype(op::kBatchNorm, {&x_in, &w_in, &b_in});
  const Tensor x = castTo(x_in, dt), w = castTo(w_in, dt), b = castTo(b_in, dt);
  const k::BatchNormShape g{x.size(0), x.size(1), x.size(2) * x.size(3)};
  const OpRecord op_record = record(op::kBatchNorm, {&x, &w, &b});
  Tensor y = like(x, x.shape());
  auto stats = std::make_shared<std::vector<float>>();  // (mean, rstd) per channel
  const k::ChannelSums sums = training ? tls_sync_batchnorm : k::ChannelSums{};
  if (computes(y)) {
    stats->resize(static_cast<std::size_t>(2 * g.c));
    k::batchNorm2dForward(g, x.data(), w.defined() ? w.data() : nullptr, b.defined() ? b.data() : nullptr,
                          running_mean.data(), running_var.data(), training, momentum, eps, y.data(), stats->data(),
                          sums);
  }
  recordBackward(y, {&x, &w, &b}, [x, w, b = GradRef(b), y = GradRef(y), stats, g, training, sums] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    const auto [gx, gw, gb] = gradTargets(x, w, b);
    if (computes(y))
      k::batchNorm2dBackward(g, x.data(), gy.data(), w.defined() ? w.data() : nullptr, stats->data(), training, gx.data,
                             gx.accumulate, gw.data, gb.data, gw.accumulate || gb.accumulate, sums);
    gradsWritten(x, w, b);
  });
  return finish(y);
}

}  // namespace hpu::core::ops
