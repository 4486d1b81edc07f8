// StochasticWeightAveraging through the real Trainer: the weights at the end
// equal the mean of the weights at the start of the SWA epochs (recorded
// independently by a LambdaCallback), the lr follows SWALR from
// swa_epoch_start, and batch norm's running statistics are the average of
// the batch statistics of one pass over the training data.
#include <gmock/gmock.h>

#include <cmath>

#include "hpu/core/callbacks/lambda_callback.h"
#include "trainer_support.h"

namespace hpu::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::BatchNormClassifier;
using testing::SmallImages;
using testing::SmallImagesData;
using testing::TempDir;

constexpr const char* kQuiet =
    "{max_epochs: 4, logger: false, enable_checkpointing: false, enable_progress_bar: false, "
    "enable_model_summary: false, num_sanity_val_steps: 0, limit_val_batches: 0}";

std::unique_ptr<Callback> swa(const std::string& init_args) {
  return testing::buildComponent<Callback>(
      config::ComponentKind::kCallback,
      "{class_path: lightning.pytorch.callbacks.StochasticWeightAveraging, init_args: " + init_args + "}",
      "trainer.callbacks");
}

struct EpochStart {
  std::vector<double> weights;  // every parameter's values, concatenated
  double lr;
  std::string scheduler;
};

std::vector<double> weightsOf(const LightningModule& m) {
  std::vector<double> w;
  for (const nn::NamedTensor& p : m.namedParameters())
    for (float v : p.tensor.values()) w.push_back(v);
  return w;
}

class StochasticWeightAveragingTest : public ::testing::TestWithParam<const char*> {};

// swa_epoch_start 2 of 4 epochs (or the fraction 0.5): SWA runs in epochs
// 1..3 (0-based), averaging the weights found at their start.
TEST_P(StochasticWeightAveragingTest, AveragesTheEpochStartWeightsAndRecomputesBatchNorm) {
  TempDir dir;
  device::Platform platform = device::Platform::fromEnv(Environment{{"HPU_EMULATOR_DEVICES", "1"}});
  std::vector<EpochStart> seen;
  std::vector<std::unique_ptr<Callback>> callbacks;
  callbacks.push_back(swa(std::string("{swa_lrs: 0.05, annealing_epochs: 2, annealing_strategy: linear, ") + GetParam() + "}"));
  callbacks.push_back(std::make_unique<LambdaCallback>(LambdaHooks{.on_train_epoch_start = [&](Trainer& t) {
    seen.push_back({weightsOf(t.model()), t.optimizer()->lr(), t.scheduler() ? t.scheduler()->name() : ""});
  }}));
  auto trainer = testing::makeTrainer(dir.path().string(), kQuiet, std::move(callbacks), platform);
  BatchNormClassifier model;
  SmallImagesData data;
  trainer->fit(model, data, "");

  ASSERT_EQ(seen.size(), 4u);
  // SWALR from epoch 1: 0.1 annealed linearly to 0.05 over two epochs.
  EXPECT_THAT(std::vector<std::string>({seen[0].scheduler, seen[1].scheduler, seen[3].scheduler}),
              ElementsAre("", "SWALR", "SWALR"));
  EXPECT_DOUBLE_EQ(seen[0].lr, 0.1);
  EXPECT_DOUBLE_EQ(seen[1].lr, 0.1);
  EXPECT_DOUBLE_EQ(seen[2].lr, 0.075);
  EXPECT_DOUBLE_EQ(seen[3].lr, 0.05);

  const std::vector<double> got = weightsOf(model);
  ASSERT_EQ(got.size(), seen[1].weights.size());
  for (std::size_t k = 0; k < got.size(); ++k) {
    const double mean = (seen[1].weights[k] + seen[2].weights[k] + seen[3].weights[k]) / 3;
    EXPECT_NEAR(got[k], mean, 1e-6) << "parameter value " << k;
  }
  EXPECT_GT(std::abs(seen[3].weights[0] - seen[1].weights[0]), 1e-4) << "the weights moved between epochs";

  // Three batches of four images: the running mean is the mean of the batch
  // means, the running variance the mean of the unbiased batch variances.
  for (std::int64_t c = 0; c < 2; ++c) {
    double mean = 0, var = 0;
    for (std::int64_t b = 0; b < 3; ++b) {
      double s = 0, sq = 0;
      for (std::int64_t i = 4 * b; i < 4 * b + 4; ++i)
        for (std::int64_t j = 0; j < 3; ++j) s += SmallImages::pixel(i, c, j);
      const double m = s / 12;
      for (std::int64_t i = 4 * b; i < 4 * b + 4; ++i)
        for (std::int64_t j = 0; j < 3; ++j) sq += (SmallImages::pixel(i, c, j) - m) * (SmallImages::pixel(i, c, j) - m);
      mean += m / 3;
      var += sq / 11 / 3;
    }
    EXPECT_NEAR(model.bn->running_mean.values()[c], mean, 1e-6) << "channel " << c;
    EXPECT_NEAR(model.bn->running_var.values()[c], var, 1e-6) << "channel " << c;
  }
  EXPECT_EQ(model.bn->momentum(), std::optional<float>(0.1f)) << "the momentum is restored";
}

INSTANTIATE_TEST_SUITE_P(EpochOrFraction, StochasticWeightAveragingTest,
                         ::testing::Values("swa_epoch_start: 2, device: cpu", "swa_epoch_start: 0.5, device: hpu",
                                           "swa_epoch_start: 2, device: null"));

TEST(StochasticWeightAveraging, RefusesWhatLightningRefuses) {
  EXPECT_THAT(testing::errorOf([] { swa("{}"); }),
              HasSubstr("trainer.callbacks.init_args.swa_lrs: missing required key"));
  EXPECT_THAT(testing::errorOf([] { swa("{swa_lrs: [0.1, 0.2]}"); }),
              HasSubstr("swa_lrs: has 2 learning rates; the optimizer has 1 parameter group"));
  EXPECT_THAT(testing::errorOf([] { swa("{swa_lrs: 0.1, swa_epoch_start: 1.5}"); }),
              HasSubstr("trainer.callbacks.init_args.swa_epoch_start"));
  EXPECT_THAT(testing::errorOf([] { swa("{swa_lrs: 0.1, device: cuda}"); }), HasSubstr("device"));

  TempDir dir;
  device::Platform platform = device::Platform::fromEnv(Environment{{"HPU_EMULATOR_DEVICES", "1"}});
  std::vector<std::unique_ptr<Callback>> callbacks;
  callbacks.push_back(swa("{swa_lrs: 0.1}"));
  auto trainer = testing::makeTrainer(dir.path().string(),
                                      "{max_epochs: -1, max_steps: 5, logger: false, enable_checkpointing: false, "
                                      "enable_progress_bar: false, enable_model_summary: false}",
                                      std::move(callbacks), platform);
  BatchNormClassifier model;
  SmallImagesData data;
  EXPECT_EQ(testing::errorOf([&] { trainer->fit(model, data, ""); }),
            "StochasticWeightAveraging averages the weights per epoch up to trainer.max_epochs; set "
            "trainer.max_epochs");
}

}  // namespace
}  // namespace hpu::core
