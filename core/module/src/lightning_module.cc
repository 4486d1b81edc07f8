#include "hpu/core/module/lightning_module.h"

#include "hpu/core/base/errors.h"
#include "hpu/device/check.h"
#include "hpu/core/profilers/profiler.h"

namespace hpu::core {

Prediction LightningModule::predictStep(const Batch& batch, std::int64_t) { return {(*this)(nn::Inputs{batch}), {}}; }

OptimizerConfig LightningModule::configureOptimizers() {
  throw UsageError(typeName() +
                   " does not configure an optimizer: give one in the config (optimizer: {class_path: AdamW, "
                   "init_args: {lr: 0.001}}) or override configureOptimizers()");
}

void LightningModule::log(const std::string& name, const Tensor& scalar, const LogOptions& options) {
  if (scalar.shapeOnly()) return;  // a dry run (estimate) has no values to log
  log(name, static_cast<double>(scalar.item()), options);
}

void LightningModule::log(const std::string& name, double value, const LogOptions& options) {
  if (sink_ != nullptr) sink_->log(name, value, options);
}

device::Device& LightningModule::device() const {
  if (device_ != nullptr) return *device_;
  // A model used without a Trainer: where its parameters are.
  const std::vector<Tensor> params = parameters();
  HPU_CHECK(!params.empty() && params.front().storage(), "{}: device() of a model with no parameter placed",
            typeName());
  return params.front().device();
}

Profiler& LightningModule::profiler() {
  static PassThroughProfiler none;
  return profiler_ != nullptr ? *profiler_ : none;
}

}  // namespace hpu::core
