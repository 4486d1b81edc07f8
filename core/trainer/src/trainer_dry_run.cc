// The Trainer's shape-only dry runs (`hpu-train estimate`): fit's training
// step and predict's step on batches without values, through the same code
// the real loops run (trainStep, the strategy's hooks, the precision plugin).
#include "hpu/core/trainer/trainer.h"
#include "hpu/device/check.h"
#include "metric_collector.h"

namespace hpu::core {

Batch Trainer::dryRunBatch(data::Split split, std::int64_t size) {
  data::HostBatch hb;
  for (const data::Field& f : data_->batchFields(split)) {
    data::HostTensor t{f, {size}, {}, {}};
    t.shape.insert(t.shape.end(), f.shape.begin(), f.shape.end());
    hb.tensors.push_back(std::move(t));
  }
  return toDevice(hb);
}

void Trainer::dryRunFit(LightningModule& model, data::DataModule& data, std::int64_t steps, const DryRunHooks& hooks) {
  HPU_CHECK(dryRun(), "dryRunFit needs a shape-only device");
  setupModel(model, data, data::Stage::kFit);
  if (hooks.model_ready) hooks.model_ready();
  configureOptimizers();
  if (hooks.optimizer_ready) hooks.optimizer_ready();
  model.train();
  const std::int64_t micro = data.loaderOptions(data::Split::kTrain).batch_size;
  std::int64_t batch_idx = 0;
  StepWindow window;
  for (std::int64_t step = 0; step < steps; ++step) {
    for (std::int64_t m = 0; m < options_.accumulate_grad_batches; ++m, ++batch_idx) {
      const Batch batch = dryRunBatch(data::Split::kTrain, micro);
      trainStep(window, batch, batch_idx, m + 1 == options_.accumulate_grad_batches);
      strategy_->device().graph().markStep();
      metrics_->takeStepMetrics();
    }
    if (hooks.step_end) hooks.step_end(step);
  }
}

void Trainer::rehearseSetup(LightningModule& model, data::DataModule& data, data::Stage stage) {
  HPU_CHECK(dryRun(), "rehearseSetup needs a shape-only device");
  setupModel(model, data, stage);
  if (stage == data::Stage::kFit) configureOptimizers();
}

void Trainer::dryRunPredict(LightningModule& model, data::DataModule& data) {
  HPU_CHECK(dryRun(), "dryRunPredict needs a shape-only device");
  setupModel(model, data, data::Stage::kPredict);
  model.eval();
  autograd::TapeScope no_grad(nullptr);
  GatheredParameters gathered(*strategy_, *params_, Strategy::GatherScope::kStep);
  const Batch batch = dryRunBatch(data::Split::kPredict, data.loaderOptions(data::Split::kPredict).batch_size);
  auto autocast = precision_->forwardContext();
  model.predictStep(batch, 0);
  strategy_->device().graph().markStep();
}

std::vector<std::int64_t> Trainer::bucketSizes() const {
  std::vector<std::int64_t> out;
  for (const nn::ParamBucket& b : params_->buckets()) out.push_back(b.numel);
  return out;
}

}  // namespace hpu::core
