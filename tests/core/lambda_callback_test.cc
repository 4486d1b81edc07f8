// LambdaCallback: hooks given as lambdas run at Lightning's points of a fit,
// in Lightning's order; hooks left empty do nothing.
#include <gmock/gmock.h>

#include "hpu/core/callbacks/lambda_callback.h"
#include "trainer_support.h"

namespace hpu::core {
namespace {

using ::testing::ElementsAre;

TEST(LambdaCallback, RunsItsHooksInLightningsOrder) {
  testing::TempDir dir;
  device::Platform platform = device::Platform::fromEnv(Environment{{"HPU_EMULATOR_DEVICES", "1"}});
  std::vector<std::string> calls;
  const auto note = [&](const char* hook) { return [&calls, hook](Trainer&) { calls.push_back(hook); }; };
  const auto noteBatch = [&](const char* hook) {
    return [&calls, hook](Trainer&, std::int64_t i) { calls.push_back(hook + std::to_string(i)); };
  };
  std::vector<std::unique_ptr<Callback>> callbacks;
  callbacks.push_back(std::make_unique<LambdaCallback>(LambdaHooks{
      .setup = [&](Trainer&, data::Stage s) { calls.push_back(s == data::Stage::kFit ? "setup fit" : "setup"); },
      .on_fit_start = note("fit_start"),
      .on_fit_end = note("fit_end"),
      .on_train_epoch_start = note("train_epoch_start"),
      .on_train_epoch_end = note("train_epoch_end"),
      .on_train_batch_end = noteBatch("train_batch_end "),
      .on_validation_start = note("validation_start"),
      .on_validation_end = note("validation_end"),
      .on_validation_batch_start = noteBatch("validation_batch_start ")}));
  auto trainer = testing::makeTrainer(dir.path().string(),
                                      "{max_epochs: 1, limit_train_batches: 2, limit_val_batches: 1, logger: false, "
                                      "enable_checkpointing: false, enable_progress_bar: false, "
                                      "enable_model_summary: false, num_sanity_val_steps: 0}",
                                      std::move(callbacks), platform);
  testing::BatchNormClassifier model;
  testing::SmallImagesData data;
  trainer->fit(model, data, "");
  EXPECT_THAT(calls, ElementsAre("setup fit", "fit_start", "train_epoch_start", "train_batch_end 0", "train_batch_end 1",
                                 "validation_start", "validation_batch_start 0", "validation_end", "train_epoch_end",
                                 "fit_end"));
}

}  // namespace
}  // namespace hpu::core
