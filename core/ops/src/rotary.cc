// Rotary position embeddings (device/kernels/rotary.h).
#include "hpu/device/kernels/rotary.h"

#include <cmath>
#include <memory>
#include <numbers>

#include "hpu/core/ops/ops.h"
#include "op_support.h"

namespace hpu::core::ops {

using namespace detail;
namespace k = device::kernels;

std::vector<float> ropeInverseFrequencies(std::int64_t d, float theta, const RopeScaling& s) {
  std::vector<float> inv(static_cast<std::size_t>(d / 2));
  for (std::size_t i = 0; i < inv.size(); ++i)
    inv[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(d));
  if (s.type == RopeScaling::Type::kLinear)
    for (float& f : inv) f /= s.factor;
  if (s.type == RopeScaling::Type::kLlama3) {
    const auto old_context = static_cast<float>(s.original_max_position_embeddings);
    const float low_freq_wavelen = old_context / s.low_freq_factor, high_freq_wavelen = old_context / s.high_freq_factor;
    for (float& f : inv) {
      const float wavelen = 2.0f * std::numbers::pi_v<float> / f;
      if (wavelen > low_freq_wavelen) {
        f /= s.factor;
      } else if (wavelen >= high_freq_wavelen) {
        const float smooth = (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1 - smooth) * f / s.factor + smooth * f;
      }
    }
  }
  return inv;
}

namespace {

// The rotation of x viewed as [groups, len, d] (heads == 0), or of x [B, len,
// heads * d] into [B, heads, len, d] (heads > 0), as one recorded op.
Tensor rotate(const Tensor& x_in, std::int64_t heads, const Tensor& positions, float theta,
              const RopeScaling& scaling) {
  const Tensor x = castTo(x_in, computeDtype(op::kRotary, {&x_in}));
  const OpRecord op_record = record(op::kRotary, {&x, &positions});
  const std::int64_t len = heads > 0 ? x.size(1) : x.size(-2);
  const std::int64_t d = heads > 0 ? x.size(2) / heads : x.size(-1), groups = x.numel() / (len * d);
  Tensor y = like(x, heads > 0 ? Shape{x.size(0), heads, len, d} : x.shape());
  auto inv_freq = std::make_shared<const std::vector<float>>(ropeInverseFrequencies(d, theta, scaling));
  if (computes(y))
    k::rotaryForward(x.data(), groups, len, d, positions.labels(), inv_freq->data(), y.data(), heads);
  recordBackward(y, {&x}, [x = GradRef(x), y = GradRef(y), positions, groups, len, d, heads, inv_freq] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget g = gradTarget(x);
    if (g.data != nullptr)
      k::rotaryBackward(gy.data(), groups, len, d, positions.labels(), inv_freq->data(), g.data, g.accumulate, heads);
    gradWritten(x);
  });
  return finish(y);
}

}  // namespace

Tensor rotaryEmbedding(const Tensor& x, const Tensor& positions, float theta, const RopeScaling& scaling) {
  require(x.ndim() >= 2 && x.size(-1) % 2 == 0 && positions.dtype() == DType::kInt64 && positions.ndim() == 1 &&
              positions.size(0) == x.size(-2),
          op::kRotary, [&] {
            return fmt::format("expects x [..., T, D] with D even and int64 positions [T]; got {} and {}",
                               x.shape().str(), positions.shape().str());
          });
  return rotate(x, 0, positions, theta, scaling);
}

Tensor splitHeadsRotary(const Tensor& x, std::int64_t heads, const Tensor& positions, float theta,
                        const RopeScaling& scaling) {
  require(x.ndim() == 3 && heads > 0 && x.size(2) % (2 * heads) == 0 && positions.dtype() == DType::kInt64 &&
              positions.ndim() == 1 && positions.size(0) == x.size(1),
          op::kRotary, [&] {
            return fmt::format(
                "expects x [B, T, heads * D] with {} heads, D even, and int64 positions [T]; got {} and {}", heads,
                x.shape().str(), positions.shape().str());
          });
  return rotate(x, heads, positions, theta, scaling);
}

}  // namespace hpu::core::ops
