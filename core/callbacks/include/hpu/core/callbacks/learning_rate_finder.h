// The learning-rate range test of Lightning's Tuner.lr_find, which the
// LearningRateFinder callback runs at the start of fit: from the state the
// fit starts in, num_training_steps optimizer steps with the lr rising from
// min_lr to max_lr (exponentially or linearly), the loss smoothed as
// Lightning's (beta 0.98, bias-corrected), stopping when it exceeds
// early_stop_threshold times the best; then the weights, optimizer and loop
// are restored from a checkpoint taken before, and the suggestion is the lr
// where the smoothed loss falls fastest. Every rank calls it; the losses
// are global rank 0's, so every rank reaches the same suggestion.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace hpu::core {

class Trainer;

struct LrFindOptions {
  double min_lr = 1e-8;
  double max_lr = 1.0;
  std::int64_t num_training_steps = 100;
  bool linear = false;                             // mode: linear (else exponential)
  std::optional<double> early_stop_threshold = 4.0;  // nullopt: never stop early
};

struct LrFindResult {
  std::vector<double> lrs;     // the lr of each step run
  std::vector<double> losses;  // the smoothed loss after it
  std::optional<std::size_t> suggestion;  // index into lrs, if there were enough points
  std::optional<double> suggestedLr() const {
    return suggestion ? std::optional<double>(lrs[*suggestion]) : std::nullopt;
  }
};

// REQUIRES: inside fit, once the optimizer is set up and before the loop
// (a callback's onFitStart), on every rank.
LrFindResult lrFind(Trainer& trainer, const LrFindOptions& options);

// Lightning's _LRFinder.suggestion: of losses[skip_begin, size - skip_end),
// the non-finite dropped, the position of the steepest descent (the minimum
// of torch.gradient's central differences, one-sided at the ends) plus
// skip_begin; nullopt with fewer than 2 points. As in Lightning, positions
// count the finite losses only, so a dropped loss shifts the index.
std::optional<std::size_t> suggestLrIndex(std::span<const double> losses, std::size_t skip_begin = 10,
                                          std::size_t skip_end = 1);

// Draws the curve (lrs vs losses, the ends skipped as in the suggestion; a
// logarithmic lr axis unless `linear`) with the suggestion marked, into a
// PNG or SVG at `path` (gnuplot).
void plotLrFind(const LrFindResult& result, bool linear, const std::string& path);

}  // namespace hpu::core
