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
  // over the ranks that hold the other parts, in double and in rank order
  // (every rank gets the same bits): the identity when every rank holds all.
  std::function<double(double)> total = [](double v) { return v; };
};

// The L2 norm of the gradients over every rank's parts (torch's
// clip_grad_norm_ total norm): the weighted squares added in double one
// after another, span after span (not per span), totaled over the ranks in
// double. The one norm of every layout, so that gradient_clip_val clips
// alike whatever holds the gradients; layouts whose ranks hold the same
// gradients in the same order (replicated on tensor-parallel ranks, weighted
// 1/2, or whole on one ZeRO rank) give the same bits. Summed in another
// order (split or sharded across ranks), the same gradients differ by
// double's rounding, 1e-16 relative.
double gradientNorm(const GradientView& grads);

}  // namespace hpu::core::optim
