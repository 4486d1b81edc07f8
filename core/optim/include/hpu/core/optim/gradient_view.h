// The gradients an optimizer steps with on this rank (every bucket, or this
// rank's ZeRO shards), as the precision plugin and gradient clipping see
// them, and how to total a number over all ranks' parts.
#pragma once

#include <functional>
#include <span>
#include <vector>

namespace hpu::core::optim {

struct GradientView {
  std::vector<std::span<float>> spans;
  // Sums a per-rank partial (a squared norm, a count of non-finite values)
  // over the ranks that hold the other parts: the identity when every rank
  // holds all.
  std::function<double(double)> total = [](double v) { return v; };
};

}  // namespace hpu::core::optim
