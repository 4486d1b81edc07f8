// 2-D max and average pooling.
#include <memory>
#include <vector>

#include "hpu/core/ops/ops.h"
#include "hpu/device/kernels/pool.h"
#include "op_support.h"

namespace hpu::core::ops {

using namespace detail;
namespace k = device::kernels;

namespace {

k::Pool2dShape poolShape(const Tensor& x, const Pool2dOptions& o, const OpInfo& op) {
  require(x.ndim() == 4, op, [&] { return "expects [N, C, H, W], got " + x.shape().str(); });
  // As torch: a window must overlap the input (a max-pool window of padding
  // only would have no arg-max).
  require(o.kernel >= 1 && o.stride >= 0 && o.padding >= 0 && o.padding <= o.kernel / 2, op, [&] {
    return fmt::format(
        "kernel {}, stride {}, padding {}: expected kernel >= 1, stride >= 0 and padding at most half "
        "the kernel",
        o.kernel, o.stride, o.padding);
  });
  const k::Pool2dShape g{x.size(0) * x.size(1),          x.size(2), x.size(3), o.kernel,
                         o.stride ? o.stride : o.kernel, o.padding};
  // Checked before outH(): integer division truncates toward zero.
  require(g.h + 2 * g.pad >= g.kernel && g.w + 2 * g.pad >= g.kernel, op, "window larger than the padded input");
  return g;
}

}  // namespace

Tensor maxPool2d(const Tensor& x_in, const Pool2dOptions& o) {
  const Tensor x = castTo(x_in, computeDtype(op::kMaxPool2d, {&x_in}));
  const k::Pool2dShape g = poolShape(x, o, op::kMaxPool2d);
  const OpRecord op_record = record(op::kMaxPool2d, {&x});
  Tensor y = like(x, {x.size(0), x.size(1), g.outH(), g.outW()});
  // Arg-max positions: host memory, as the device keeps them in its workspace.
  auto argmax = std::make_shared<std::vector<std::int32_t>>();
  if (computes(y)) {
    argmax->resize(static_cast<std::size_t>(y.numel()));
    k::maxPool2dForward(g, x.data(), y.data(), argmax->data());
  }
  recordBackward(y, {&x}, [x = GradRef(x), y = GradRef(y), g, argmax] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget gx = gradTarget(x);
    if (gx.data != nullptr) k::maxPool2dBackward(g, gy.data(), argmax->data(), gx.data, gx.accumulate);
    gradWritten(x);
  });
  return finish(y);
}

Tensor avgPool2d(const Tensor& x_in, const Pool2dOptions& o) {
  const Tensor x = castTo(x_in, computeDtype(op::kAvgPool2d, {&x_in}));
  const k::Pool2dShape g = poolShape(x, o, op::kAvgPool2d);
  const OpRecord op_record = record(op::kAvgPool2d, {&x});
  Tensor y = like(x, {x.size(0), x.size(1), g.outH(), g.outW()});
  if (computes(y)) k::avgPool2dForward(g, x.data(), y.data());
  recordBackward(y, {&x}, [x = GradRef(x), y = GradRef(y), g] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget gx = gradTarget(x);
    if (gx.data != nullptr) k::avgPool2dBackward(g, gy.data(), gx.data, gx.accumulate);
    gradWritten(x);
  });
  return finish(y);
}

}  // namespace hpu::core::ops
