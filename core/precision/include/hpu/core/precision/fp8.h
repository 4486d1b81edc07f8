// fp8 layers: Linear replacements that run their GEMMs on fp8 values.
// Training (Transformer Engine's DelayedScaling): inputs and weights in E4M3,
// gradients in E5M2 (HYBRID) or E4M3, each tensor scaled per-tensor from the
// max |x| over a window of previous steps; outputs bf16.
// Inference (the two-step flow): a measurement run records each layer's
// input and weight max |x|; a quantization run reads them as static scales.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "hpu/core/nn/layers.h"
#include "hpu/core/precision/precision.h"

namespace hpu::core::fp8 {

// Per-tensor delayed scaling: the scale in use and the amax window behind it.
struct DelayedScale {
  float scale = 1.0f;
  std::deque<float> history;

  // Records this step's amax and recomputes the scale for the next step.
  void update(float amax, std::size_t window, DType format, int margin);
};

// Replaces every linear layer (nn::Linear, nn::Conv1D) under `root`, but
// those at the module paths in `keep`, with an fp8 training layer sharing
// its weight and bias (parameter names stay the same). Returns how many.
int convertForTraining(nn::Module& root, const Fp8Options& options, const std::set<std::string>& keep = {});

// Measured max |x| per layer input and weight, by module path.
struct Stats {
  std::map<std::string, float> inputs, weights;
  std::string toJson() const;
  static Stats fromJson(const std::string& text, const std::string& origin);
};

// Replaces every linear layer under `root`, but those in `keep`, with an
// inference layer that measures into `stats` (quant = false) or runs in fp8
// with the scales from `stats` (quant = true). Returns how many.
int convertForInference(nn::Module& root, bool quant, std::shared_ptr<Stats> stats,
                        const std::set<std::string>& keep = {});

}  // namespace hpu::core::fp8
