// BackboneFinetuning through the real Trainer: the backbone stays exactly as
// initialised while frozen (its batch norm trains, or with train_bn false is
// frozen with its running statistics); from unfreeze_backbone_at_epoch it
// trains in parameter group 1 (without its batch norm if train_bn is false) whose lr starts at group 0's x 0.1 and doubles
// each epoch until it would pass group 0's; the groups survive a checkpoint
// (a resumed run ends with the weights of an uninterrupted one, bit for
// bit); models without a backbone are refused in Lightning's words.
#include <gmock/gmock.h>

#include "hpu/core/callbacks/lambda_callback.h"
#include "trainer_support.h"

namespace hpu::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::SmallImagesData;
using testing::TempDir;

constexpr const char* kQuiet =
    "{max_epochs: 7, logger: false, enable_checkpointing: false, enable_progress_bar: false, "
    "enable_model_summary: false, num_sanity_val_steps: 0, limit_val_batches: 0}";

// BatchNorm2d -> Linear(6, 5) -> ReLU form the backbone; Linear(5, 3) is the head. Adam, lr 0.01.
class BackboneClassifier final : public LightningModule {
 public:
  std::string typeName() const override { return "BackboneClassifier"; }
  void configureModel(nn::InitContext& ctx, const ModelInput& input) override {
    bn = registerModule("bn", std::make_shared<nn::BatchNorm2d>(ctx, 2));
    fc = registerModule("fc", std::make_shared<nn::Linear>(ctx, 6, 5));
    head = registerModule("head", std::make_shared<nn::Linear>(ctx, 5, input.num_classes));
  }
  using Module::forward;
  Tensor forward(const Tensor& x) override { return (*head)(ops::relu((*fc)(ops::flatten((*bn)(x))))); }
  Tensor trainingStep(const Batch& batch, std::int64_t) override {
    Tensor loss = ops::crossEntropy(forward(batch["x"]), batch["y"]);
    log("train_loss", loss);
    return loss;
  }
  OptimizerConfig configureOptimizers() override { return {optim::makeAdam({.lr = 0.01}), nullptr}; }
  std::vector<nn::Module*> backbone() override { return {bn.get(), fc.get()}; }

  std::shared_ptr<nn::BatchNorm2d> bn;
  std::shared_ptr<nn::Linear> fc, head;
};

std::unique_ptr<Callback> finetuning(const std::string& init_args) {
  return testing::buildComponent<Callback>(
      config::ComponentKind::kCallback,
      "{class_path: lightning.pytorch.callbacks.BackboneFinetuning, init_args: " + init_args + "}", "trainer.callbacks");
}

// What each epoch starts with, after BackboneFinetuning's hook.
struct EpochStart {
  std::vector<float> fc, bn, bn_stats, head;
  std::vector<double> group_lrs;
};

std::vector<float> valuesOf(std::initializer_list<Tensor> tensors) {
  std::vector<float> out;
  for (const Tensor& t : tensors)
    for (float v : t.values()) out.push_back(v);
  return out;
}

struct FitRun {
  std::vector<EpochStart> epochs;
  std::vector<float> final_weights;
};

FitRun fit(const std::string& init_args, const std::string& trainer_yaml = kQuiet, const std::string& ckpt_path = "",
        const std::string& save_at_epoch_end = "", std::int64_t save_epoch = -1) {
  TempDir dir;
  device::Platform platform = device::Platform::fromEnv(Environment{{"HPU_EMULATOR_DEVICES", "1"}});
  FitRun run;
  BackboneClassifier model;
  std::vector<std::unique_ptr<Callback>> callbacks;
  callbacks.push_back(finetuning(init_args));
  callbacks.push_back(std::make_unique<LambdaCallback>(LambdaHooks{
      .on_train_epoch_start =
          [&](Trainer& t) {
            EpochStart e{valuesOf({model.fc->weight, model.fc->bias}), valuesOf({model.bn->weight, model.bn->bias}),
                         valuesOf({model.bn->running_mean, model.bn->running_var}),
                         valuesOf({model.head->weight, model.head->bias}),
                         {}};
            for (std::size_t g = 0; g < t.optimizer()->numGroups(); ++g) e.group_lrs.push_back(t.optimizer()->groupLr(g));
            run.epochs.push_back(e);
          },
      .on_train_epoch_end =
          [&](Trainer& t) {
            if (t.currentEpoch() == save_epoch) t.saveCheckpoint(save_at_epoch_end);
          }}));
  auto trainer = testing::makeTrainer(dir.path().string(), trainer_yaml, std::move(callbacks), platform);
  SmallImagesData data;
  trainer->fit(model, data, ckpt_path);
  for (const auto& p : model.namedParameters())
    for (float v : p.tensor.values()) run.final_weights.push_back(v);
  return run;
}

TEST(BackboneFinetuning, FreezesTheBackboneThenTrainsItInAGroupWithAGrowingLr) {
  const FitRun run = fit("{unfreeze_backbone_at_epoch: 2}");
  const auto& e = run.epochs;
  ASSERT_EQ(e.size(), 7u);
  // Frozen for epochs 0 and 1: the backbone's Linear is as initialised; the
  // head and the batch norm (train_bn) train in group 0.
  EXPECT_EQ(e[1].fc, e[0].fc);
  EXPECT_EQ(e[2].fc, e[0].fc);
  EXPECT_NE(e[1].head, e[0].head);
  EXPECT_NE(e[1].bn, e[0].bn);
  EXPECT_NE(e[3].fc, e[2].fc) << "the backbone trains from epoch 2";
  // Group 1 from epoch 2: 0.01 x 0.1, doubled per epoch, aligned at 0.01.
  EXPECT_THAT(e[0].group_lrs, ElementsAre(0.01));
  EXPECT_THAT(e[1].group_lrs, ElementsAre(0.01));
  EXPECT_THAT(e[2].group_lrs, ElementsAre(0.01, 0.001));
  EXPECT_THAT(e[3].group_lrs, ElementsAre(0.01, 0.002));
  EXPECT_THAT(e[4].group_lrs, ElementsAre(0.01, 0.004));
  EXPECT_THAT(e[5].group_lrs, ElementsAre(0.01, 0.008));
  EXPECT_THAT(e[6].group_lrs, ElementsAre(0.01, 0.01));
}

TEST(BackboneFinetuning, InitialLrFactorAndNoAlignment) {
  const FitRun run = fit("{unfreeze_backbone_at_epoch: 1, backbone_initial_lr: 0.003, lambda_func: 3.0, "
                      "should_align: false}",
                      "{max_epochs: 4, logger: false, enable_checkpointing: false, enable_progress_bar: false, "
                      "enable_model_summary: false, num_sanity_val_steps: 0, limit_val_batches: 0}");
  ASSERT_EQ(run.epochs.size(), 4u);
  EXPECT_THAT(run.epochs[1].group_lrs, ElementsAre(0.01, 0.003));
  EXPECT_THAT(run.epochs[2].group_lrs[1], ::testing::DoubleEq(0.009));
  EXPECT_THAT(run.epochs[3].group_lrs[1], ::testing::DoubleEq(0.027)) << "not held at 0.01";
}

TEST(BackboneFinetuning, WithoutTrainBnTheBatchNormAndItsStatisticsAreFrozenToo) {
  const FitRun run = fit("{unfreeze_backbone_at_epoch: 2, train_bn: false}");
  const auto& e = run.epochs;
  EXPECT_EQ(e[2].bn, e[0].bn);
  EXPECT_EQ(e[2].bn_stats, e[0].bn_stats) << "a frozen batch norm does not track statistics";
  EXPECT_NE(e[1].head, e[0].head);
  // Unfrozen, the statistics are tracked again; the batch norm's weights
  // join no group (Lightning's filter_params leaves them out), so they stay.
  EXPECT_NE(e[3].bn_stats, e[2].bn_stats);
  EXPECT_EQ(e[6].bn, e[0].bn);
  EXPECT_NE(e[3].fc, e[2].fc);
}

// A run resumed from a checkpoint of epoch 3's end (backbone in group 1) or
// epoch 0's (still frozen) ends with the weights of the uninterrupted run.
TEST(BackboneFinetuning, ResumedRunsKeepTheGroupsAndEndBitIdentical) {
  const FitRun whole = fit("{unfreeze_backbone_at_epoch: 2}");
  for (std::int64_t saved_at : {3, 0}) {
    SCOPED_TRACE(saved_at);
    TempDir dir;
    const std::string ckpt = (dir.path() / "mid.ckpt").string();
    fit("{unfreeze_backbone_at_epoch: 2}", kQuiet, "", ckpt, saved_at);
    const FitRun resumed = fit("{unfreeze_backbone_at_epoch: 2}", kQuiet, ckpt);
    ASSERT_EQ(resumed.epochs.size(), static_cast<std::size_t>(6 - saved_at));
    EXPECT_EQ(resumed.epochs.front().group_lrs, whole.epochs[static_cast<std::size_t>(saved_at) + 1].group_lrs);
    EXPECT_EQ(resumed.final_weights, whole.final_weights);
  }
}

TEST(BackboneFinetuning, ModelsWithoutABackboneAreRefused) {
  TempDir dir;
  device::Platform platform = device::Platform::fromEnv(Environment{{"HPU_EMULATOR_DEVICES", "1"}});
  std::vector<std::unique_ptr<Callback>> callbacks;
  callbacks.push_back(finetuning("{}"));
  auto trainer = testing::makeTrainer(dir.path().string(), kQuiet, std::move(callbacks), platform);
  testing::BatchNormClassifier model;
  SmallImagesData data;
  try {
    trainer->fit(model, data, "");
    FAIL() << "fit ran";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("The LightningModule should have a nn.Module `backbone` attribute: "
                                    "BatchNormClassifier names none"));
  }
}

}  // namespace
}  // namespace hpu::core
