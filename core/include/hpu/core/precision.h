// Precision plugins own numeric precision: the dtype parameters are kept in,
// the autocast policy active during forward, loss scaling and the decision
// to skip a step whose gradients overflowed.
#pragma once

#include <memory>
#include <string>

#include "hpu/core/nn/flat_parameters.h"

namespace hpu::core {

class PrecisionPlugin {
 public:
  virtual ~PrecisionPlugin() = default;
  // Canonical name: "32-true", "bf16-mixed", ...
  virtual std::string precision() const = 0;
  // Dtype of parameters (master weights stay float32 unless "-true").
  virtual DType paramDtype() const { return DType::kFloat32; }
  // Installs the autocast policy for the forward pass until the returned
  // handle is destroyed (nullptr: nothing to install).
  virtual std::shared_ptr<void> forwardContext() { return nullptr; }
  // Factor the loss gradient is seeded with (dynamic loss scaling).
  virtual float lossScale() const { return 1.0f; }
  // After backward and gradient synchronisation: unscales gradients and
  // returns false when the step must be skipped (non-finite gradients).
  virtual bool prepareStep(nn::FlatParameters&) { return true; }
  // State carried in checkpoints, as JSON text ("" for none).
  virtual std::string stateJson() const { return ""; }
  virtual void loadStateJson(const std::string&) {}
};

// "32-true": everything in float32.
std::unique_ptr<PrecisionPlugin> makeFullPrecision();

}  // namespace hpu::core
