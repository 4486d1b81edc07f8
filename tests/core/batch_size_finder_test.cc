// BatchSizeFinder against a small emulated device memory: the answer is
// what fixed batch sizes show (the largest that trains without running out
// of memory, found by running each in its own fit), for power (the largest
// doubling of init_val) and binsearch (the largest, less the margin); the
// state before the search restored bit for bit; the fit that follows runs
// with the size found; data modules without the batch_arg_name refused.
#include <gmock/gmock.h>

#include <filesystem>

#include "hpu/core/callbacks/lambda_callback.h"
#include "hpu/core/data/datamodule.h"
#include "hpu/device/errors.h"
#include "trainer_support.h"

namespace hpu::core {
namespace {

using testing::State;
using testing::stateOf;
using testing::TempDir;
using ::testing::HasSubstr;

// Small enough that BoringModel on 32 features runs out at a batch size of a few dozen.
constexpr const char* kMemoryLimit = "HPU_EMULATOR_MEMORY_LIMIT";
constexpr const char* kLimit = "6KiB";
constexpr const char* kThreeSteps =
    "{max_steps: 3, logger: false, enable_checkpointing: false, enable_progress_bar: false, "
    "enable_model_summary: false, num_sanity_val_steps: 0, limit_val_batches: 0}";

device::Platform smallDevice() {
  return device::Platform::fromEnv(Environment{{"HPU_EMULATOR_DEVICES", "1"}, {kMemoryLimit, kLimit}});
}

std::unique_ptr<LightningModule> boringModel() {
  return testing::buildComponent<LightningModule>(config::ComponentKind::kModel, "{class_path: BoringModel}", "model");
}

std::unique_ptr<data::DataModule> randomData(std::int64_t batch_size) {
  return testing::buildComponent<data::DataModule>(
      config::ComponentKind::kDataModule,
      fmt::format("{{class_path: RandomDataModule, init_args: {{batch_size: {}, length: 500}}}}", batch_size), "data");
}

// Whether three training steps at `batch_size` fit in the small device.
bool fits(std::int64_t batch_size) {
  TempDir dir;
  device::Platform platform = smallDevice();
  auto trainer = testing::makeTrainer(dir.path().string(), kThreeSteps, {}, platform);
  auto model = boringModel();
  auto data = randomData(batch_size);
  try {
    trainer->fit(*model, *data, "");
    return true;
  } catch (const device::OutOfMemoryError&) {
    return false;
  }
}

// The largest batch size that fits, and that every smaller one does.
std::int64_t largestFitting() {
  static const std::int64_t largest = [] {
    std::int64_t b = 1;
    while (b < 500 && fits(b)) ++b;
    return b - 1;
  }();
  return largest;
}

struct Found {
  std::int64_t fit_batch_size = 0;  // the batch size of the fit's first step
  std::int64_t data_batch_size = 0;
  std::optional<State> before, after;  // around the search
};

Found findAndFit(const std::string& init_args) {
  TempDir dir;
  device::Platform platform = smallDevice();
  Found f;
  std::vector<std::unique_ptr<Callback>> callbacks;
  callbacks.push_back(std::make_unique<LambdaCallback>(
      LambdaHooks{.on_fit_start = [&](Trainer& t) { f.before = stateOf(t); }}));
  callbacks.push_back(testing::buildComponent<Callback>(
      config::ComponentKind::kCallback, "{class_path: BatchSizeFinder, init_args: " + init_args + "}",
      "trainer.callbacks"));
  callbacks.push_back(std::make_unique<LambdaCallback>(LambdaHooks{
      .on_fit_start = [&](Trainer& t) { f.after = stateOf(t); },
      .on_train_batch_start =
          [&](Trainer& t, std::int64_t) {
            if (f.fit_batch_size == 0) f.fit_batch_size = t.trainBatchSize();
          }}));
  auto trainer = testing::makeTrainer(dir.path().string(), kThreeSteps, std::move(callbacks), platform);
  auto model = boringModel();
  auto data = randomData(7);
  trainer->fit(*model, *data, "");
  f.data_batch_size = *data->batchSizeArg("batch_size");
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_THAT(e.path().filename().string(), ::testing::Not(::testing::StartsWith(".scale_batch_size_")))
        << "left behind";
  return f;
}

TEST(BatchSizeFinder, TheLimitMakesARangeOfBatchSizesFit) {
  // Memory grows with the batch: some fit, more do not.
  EXPECT_GE(largestFitting(), 20);
  EXPECT_LT(largestFitting(), 200);
  EXPECT_FALSE(fits(largestFitting() + 1));
}

TEST(BatchSizeFinder, PowerModeKeepsTheLargestDoublingThatFits) {
  std::int64_t expected = 3;
  while (expected * 2 <= largestFitting()) expected *= 2;
  const Found f = findAndFit("{mode: power, init_val: 3, steps_per_trial: 2}");
  EXPECT_EQ(f.fit_batch_size, expected);
  EXPECT_EQ(f.data_batch_size, expected);
  ASSERT_TRUE(f.before && f.after);
  EXPECT_TRUE(*f.before == *f.after) << "the search left the state changed";
}

TEST(BatchSizeFinder, BinsearchFindsTheLargestThatFitsLessTheMargin) {
  Found f = findAndFit("{mode: binsearch, margin: 0.0}");
  EXPECT_EQ(f.fit_batch_size, largestFitting());
  ASSERT_TRUE(f.before && f.after);
  EXPECT_TRUE(*f.before == *f.after);
  f = findAndFit("{mode: binsearch}");  // Lightning's margin: 5% off
  EXPECT_EQ(f.fit_batch_size, static_cast<std::int64_t>(static_cast<double>(largestFitting()) * 0.95));
}

TEST(BatchSizeFinder, StopsAtMaxTrialsAndMaxVal) {
  // Two trials: init_val, then its double; the second success is kept.
  EXPECT_EQ(findAndFit("{init_val: 2, max_trials: 2}").fit_batch_size, 4);
  // max_val caps the doubling, and is itself tried before it is kept.
  EXPECT_EQ(findAndFit("{init_val: 2, max_val: 6}").fit_batch_size, 6);
  // A max_val that does not fit fails its trial: power halves it, binsearch
  // bisects below it (the search once kept an untried max_val, and the fit
  // then ran out of memory).
  const std::int64_t too_big = largestFitting() + 1;
  EXPECT_EQ(findAndFit(fmt::format("{{init_val: 2, max_val: {}}}", too_big)).fit_batch_size, too_big / 2);
  EXPECT_EQ(findAndFit(fmt::format("{{mode: binsearch, margin: 0, max_val: {}}}", too_big)).fit_batch_size,
            largestFitting());
}

TEST(BatchSizeFinder, BisectsDownFromABatchOfTheWholeTrainingSet) {
  // init_val covers the 500 samples and does not fit: the search bisects
  // below it (it does not retry it for ever) and ends on the largest that fits.
  EXPECT_EQ(findAndFit("{mode: binsearch, init_val: 500, margin: 0}").fit_batch_size, largestFitting());
}

TEST(BatchSizeFinder, RefusesADataModuleWithoutTheBatchArgument) {
  TempDir dir;
  device::Platform platform = smallDevice();
  std::vector<std::unique_ptr<Callback>> callbacks;
  callbacks.push_back(testing::buildComponent<Callback>(
      config::ComponentKind::kCallback, "{class_path: BatchSizeFinder, init_args: {batch_arg_name: bs}}",
      "trainer.callbacks"));
  auto trainer = testing::makeTrainer(dir.path().string(), kThreeSteps, std::move(callbacks), platform);
  auto model = boringModel();
  auto data = randomData(7);
  EXPECT_EQ(testing::errorOf<UsageError>([&] { trainer->fit(*model, *data, ""); }),
            "BatchSizeFinder: field bs not found in the data module RandomDataModule: batch_arg_name names its "
            "init_arg that holds the batch size (batch_size in the built-in data modules but BoringDataModule, "
            "whose batch size is fixed)");
  auto boring = testing::buildComponent<data::DataModule>(config::ComponentKind::kDataModule,
                                                          "{class_path: BoringDataModule}", "data");
  callbacks.push_back(testing::buildComponent<Callback>(config::ComponentKind::kCallback,
                                                        "{class_path: BatchSizeFinder}", "trainer.callbacks"));
  trainer = testing::makeTrainer(dir.path().string(), kThreeSteps, std::move(callbacks), platform);
  EXPECT_THAT(testing::errorOf<UsageError>([&] { trainer->fit(*model, *boring, ""); }),
              HasSubstr("BatchSizeFinder: field batch_size not found in the data module BoringDataModule"));
}

}  // namespace
}  // namespace hpu::core
