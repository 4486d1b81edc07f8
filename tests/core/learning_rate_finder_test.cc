// The learning-rate range test: Lightning's suggestion rule against the
// indices Lightning's code gives (torch.gradient over float32 losses, run
// once with Debian's python3-torch); the test's lrs; the model, batch norm
// and optimizer state restored bit for bit; the suggestion as the lr of the
// fit that follows (LearningRateFinder, update_attr); the plot.
#include <gmock/gmock.h>

#include <filesystem>

#include "hpu/core/callbacks/lambda_callback.h"
#include "hpu/core/callbacks/learning_rate_finder.h"
#include "trainer_support.h"

namespace hpu::core {
namespace {

using testing::BatchNormClassifier;
using testing::SmallImagesData;
using testing::State;
using testing::stateOf;
using testing::TempDir;

TEST(LrFindSuggestion, IsTheSteepestFallOfTheSmoothedLoss) {
  const std::vector<double> losses{2.30, 2.31, 2.29, 2.30, 2.28, 2.27, 2.25, 2.22, 2.18, 2.12, 2.05,
                                   1.95, 1.80, 1.62, 1.50, 1.44, 1.41, 1.45, 1.60, 2.10, 3.40};
  EXPECT_EQ(suggestLrIndex(losses), 12u);
  EXPECT_EQ(suggestLrIndex(losses, 0, 1), 12u);
  EXPECT_EQ(suggestLrIndex(losses, 3, 5), 12u);
  std::vector<double> gaps = losses;
  gaps[12] = std::nan("");
  EXPECT_EQ(suggestLrIndex(gaps), 12u);
  // Non-finite losses are dropped before the positions are counted (Lightning's indexing).
  gaps = losses;
  gaps[11] = std::numeric_limits<double>::infinity();
  gaps[13] = std::nan("");
  EXPECT_EQ(suggestLrIndex(gaps), 11u);
  // One point after skipping: no suggestion.
  EXPECT_EQ(suggestLrIndex(std::vector<double>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0.5}), std::nullopt);
}

constexpr const char* kOneEpoch =
    "{max_epochs: 1, logger: false, enable_checkpointing: false, enable_progress_bar: false, "
    "enable_model_summary: false, num_sanity_val_steps: 0, limit_val_batches: 0}";

TEST(LrFind, RunsTheRangeTestAndRestoresTheStateBitForBit) {
  TempDir dir;
  device::Platform platform = device::Platform::fromEnv(Environment{{"HPU_EMULATOR_DEVICES", "1"}});
  LrFindResult result;
  std::optional<State> before, after;
  std::vector<std::unique_ptr<Callback>> callbacks;
  callbacks.push_back(std::make_unique<LambdaCallback>(LambdaHooks{.on_fit_start = [&](Trainer& t) {
    before = stateOf(t);
    result = lrFind(t, {.min_lr = 1e-4, .max_lr = 1.0, .num_training_steps = 20, .early_stop_threshold = std::nullopt});
    after = stateOf(t);
  }}));
  auto trainer = testing::makeTrainer(dir.path().string(), kOneEpoch, std::move(callbacks), platform);
  BatchNormClassifier model;
  SmallImagesData data;
  trainer->fit(model, data, "");
  ASSERT_TRUE(before && after);
  EXPECT_TRUE(*before == *after) << "the range test left the state changed";
  EXPECT_GT(before->tensors.size(), 4u + 2u) << "weights, running statistics and SGD's momentum buffers";
  ASSERT_EQ(result.lrs.size(), 20u);
  for (std::size_t i = 0; i < 20; ++i)
    EXPECT_NEAR(result.lrs[i], 1e-4 * std::pow(1e4, static_cast<double>(i) / 20), 1e-12 * result.lrs[i]);
  EXPECT_EQ(result.losses.size(), 20u);
  EXPECT_EQ(result.suggestion, suggestLrIndex(result.losses));
  ASSERT_TRUE(result.suggestion.has_value());
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_THAT(e.path().filename().string(), ::testing::Not(::testing::StartsWith(".lr_find_"))) << "left behind";

  // The callback runs the same test from the same state, then fits with the suggested lr.
  TempDir again;
  double fit_lr = 0;
  callbacks.clear();
  callbacks.push_back(testing::buildComponent<Callback>(
      config::ComponentKind::kCallback,
      "{class_path: LearningRateFinder, init_args: {min_lr: 1.0e-4, num_training_steps: 20, early_stop_threshold: null}}",
      "trainer.callbacks"));
  callbacks.push_back(std::make_unique<LambdaCallback>(
      LambdaHooks{.on_fit_start = [&](Trainer& t) { fit_lr = t.optimizer()->lr(); }}));
  auto tuned = testing::makeTrainer(again.path().string(), kOneEpoch, std::move(callbacks), platform);
  BatchNormClassifier model2;
  tuned->fit(model2, data, "");
  EXPECT_DOUBLE_EQ(fit_lr, *result.suggestedLr());
  EXPECT_TRUE(std::filesystem::exists(again.path() / "lr_find.png"));
}

}  // namespace
}  // namespace hpu::core
