// Callbacks observe and steer a run through Lightning's hooks. Every hook has
// an empty default; a callback overrides what it needs. Hooks run on every
// rank; callbacks that write files check trainer.isGlobalZero().
#pragma once

#include <cstdint>
#include <exception>
#include <string>

#include "hpu/core/data/datamodule.h"
#include "hpu/core/module/lightning_module.h"

namespace hpu::core {

class Trainer;

class Callback {
 public:
  virtual ~Callback() = default;
  // Identifies the callback's state in checkpoints ("ModelCheckpoint{monitor=val_loss}").
  virtual std::string stateKey() const = 0;

  virtual void setup(Trainer&, data::Stage) {}
  virtual void onFitStart(Trainer&) {}
  virtual void onFitEnd(Trainer&) {}
  virtual void onSanityCheckStart(Trainer&) {}
  virtual void onSanityCheckEnd(Trainer&) {}
  virtual void onTrainEpochStart(Trainer&) {}
  virtual void onTrainEpochEnd(Trainer&) {}
  virtual void onTrainBatchStart(Trainer&, std::int64_t batch_idx) {}
  virtual void onTrainBatchEnd(Trainer&, std::int64_t batch_idx) {}
  virtual void onValidationStart(Trainer&) {}
  virtual void onValidationEnd(Trainer&) {}
  virtual void onValidationBatchStart(Trainer&, std::int64_t batch_idx) {}
  virtual void onValidationBatchEnd(Trainer&, std::int64_t batch_idx) {}
  virtual void onTestStart(Trainer&) {}
  virtual void onTestEnd(Trainer&) {}
  virtual void onTestBatchStart(Trainer&, std::int64_t batch_idx) {}
  virtual void onTestBatchEnd(Trainer&, std::int64_t batch_idx) {}
  virtual void onPredictStart(Trainer&) {}
  virtual void onPredictEnd(Trainer&) {}
  virtual void onPredictBatchStart(Trainer&, std::int64_t batch_idx) {}
  // `outputs`: what predictStep returned for the batch.
  virtual void onPredictBatchEnd(Trainer&, const Prediction& outputs, std::int64_t batch_idx) {}

  // The stage failed with `error`; the error propagates after the hooks.
  virtual void onException(Trainer&, const std::exception& error) {}

  // State carried in checkpoints, as JSON text ("" for none).
  virtual std::string stateJson() const { return ""; }
  virtual void loadStateJson(const std::string&) {}
};

}  // namespace hpu::core
