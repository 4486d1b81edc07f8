// fp8 layers: Linear replacements that run their GEMMs on fp8 values.
// Training (Transformer Engine's DelayedScaling): inputs and weights in E4M3,
// gradients in E5M2 (HYBRID) or E4M3, each tensor scaled per-tensor from the
// max |x| over a window of previous optimizer steps, that max taken over
// every rank holding the layer (amax reduction); outputs bf16.
// Inference (the two-step flow): a measurement run records each layer's
// input and weight max |x|; a quantization run reads them as static scales.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "hpu/core/nn/layers.h"
#include "hpu/core/precision/precision.h"

namespace hpu::core::fp8 {

// Per-tensor delayed scaling over an amax window (Transformer Engine's
// amax_history and scale). `history` is the window, rows of one amax per
// tensor, newest first, zeros where no step has been (an amax is >= 0, so
// they never win). Pushes this step's `amax` as the newest row and sets each
// tensor's `scale` from its column's max in `formats`' range, 2^-margin
// below it; an amax of 0 (or not finite) keeps the scale.
// REQUIRES: history.size() is a multiple of amax.size(); scale, formats as amax.
void moveScales(std::span<float> history, std::span<float> scale, std::span<const float> amax,
                std::span<const DType> formats, int margin);

// An fp8 training layer's delayed scaling, as the precision plugin drives
// it: the max |x| of the layer's input, weight and output gradient over its
// calls in training mode since the last step, and the step that takes them
// into the window. Its scales and window are buffers of the layer
// (fp8_scale [3], fp8_amax_history [amax_history_len, 3]), so checkpoints
// carry them; a checkpoint without them (not trained in fp8) starts them
// afresh.
class ScaledLayer {
 public:
  static constexpr std::size_t kTensors = 3;  // input, weight, output gradient
  virtual ~ScaledLayer() = default;
  virtual std::array<float, kTensors> stepAmax() const = 0;
  // Takes `amax` (this step's, the max over every rank holding a piece or a
  // replica of the layer) into the window, moves the scales, clears stepAmax().
  virtual void moveScales(const std::array<float, kTensors>& amax) = 0;
};

// The fp8 training layers under `root`, by module path, in module order.
std::vector<std::pair<std::string, ScaledLayer*>> scaledLayers(nn::Module& root);

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
