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
  // Each span's share in a total over ranks (empty: 1 each): gradients that
  // `n` ranks of the total hold alike (a tensor-parallel run's unsplit
  // parameters) count 1/n on each, so that a norm counts them once.
  std::vector<double> weights;
  double weight(std::size_t span) const { return weights.empty() ? 1.0 : weights[span]; }
  // Sums a per-rank partial (a squared norm, a count of non-finite values)
  // over the ranks that hold the other parts: the identity when every rank
  // holds all.
  std::function<double(double)> total = [](double v) { return v; };
};

}  // namespace hpu::core::optim
