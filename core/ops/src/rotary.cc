// Rotary position embeddings (device/kernels/rotary.h).
#include "hpu/device/kernels/rotary.h"

#include "hpu/core/ops/ops.h"
#include "op_support.h"

namespace hpu::core::ops {

using namespace detail;
namespace k = device::kernels;

Tensor rotaryEmbedding(const Tensor& x_in, const Tensor& positions, float theta) {
  require(x_in.ndim() >= 2 && x_in.size(-1) % 2 == 0 && positions.dtype() == DType::kInt64 && positions.ndim() == 1 &&
              positions.size(0) == x_in.size(-2),
          op::kRotary, [&] {
            return fmt::format("expects x [..., T, D] with D even and int64 positions [T]; got {} and {}",
                               x_in.shape().str(), positions.shape().str());
          });
  const Tensor x = castTo(x_in, computeDtype(op::kRotary, {&x_in}));
  const OpRecord op_record = record(op::kRotary, {&x, &positions});
  const std::int64_t len = x.size(-2), d = x.size(-1), groups = x.numel() / (len * d);
  Tensor y = like(x, x.shape());
  if (computes(y)) k::rotaryForward(x.data(), groups, len, d, positions.labels(), theta, y.data());
  recordBackward(y, {&x}, [x, y, positions, groups, len, d, theta] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget g = gradTarget(x);
    if (g.data != nullptr)
      k::rotaryBackward(gy.data(), groups, len, d, positions.labels(), theta, g.data, g.accumulate);
    gradWritten(x);
  });
  return finish(y);
}

}  // namespace hpu::core::ops
