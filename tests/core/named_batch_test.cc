// Model families beyond images: data sets of named fields of any dtype,
// batches of named tensors, forward with several named inputs, and
// predictions that are what the model returns (rows or text), through the
// real Trainer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "hpu/core/app/root.h"
#include "hpu/core/base/file_io.h"
#include "hpu/core/config/normalize.h"
#include "hpu/core/nn/layers.h"
#include "hpu/core/tensor/autograd.h"
#include "hpu/core/trainer/trainer.h"
#include "trainer_support.h"

namespace hpu::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::errorOf;
using testing::makeTrainer;
using testing::TempDir;
using testing::testDevice;

TEST(TensorDict, KeepsInsertionOrderReplacesByNameAndNamesWhatIsThere) {
  const Tensor a = Tensor::zeros(testDevice(), {2}), b = Tensor::zeros(testDevice(), {3});
  TensorDict d{{"input_ids", a}, {"attention_mask", b}};
  d.set("input_ids", b);
  EXPECT_EQ(d.size(), 2u);
  EXPECT_EQ(d.front().first, "input_ids");
  EXPECT_TRUE(d["input_ids"].sameAs(b));
  EXPECT_EQ(d.find("labels"), nullptr);
  EXPECT_EQ(errorOf([&] { d["labels"]; }), "no tensor 'labels' among input_ids, attention_mask");
}

// Token ids (int64 [4]), a float mask ([4]) and a class label per sample:
// sample i holds ids i..i+3 (mod 16), mask 1 0 1 0, label i % 3.
class TokenDataset final : public data::Dataset {
 public:
  explicit TokenDataset(std::int64_t n) : n_(n) {}
  std::int64_t size() const override { return n_; }
  const std::vector<data::Field>& fields() const override { return fields_; }
  void fetch(std::span<const std::int64_t> indices, std::span<const data::FieldBuffer> out) const override {
    for (std::size_t s = 0; s < indices.size(); ++s) {
      const std::int64_t i = indices[s];
      for (std::int64_t t = 0; t < 4; ++t) {
        out[0].ints[s * 4 + static_cast<std::size_t>(t)] = (i + t) % 16;
        out[1].floats[s * 4 + static_cast<std::size_t>(t)] = t % 2 == 0 ? 1.0f : 0.0f;
      }
      out[2].ints[s] = i % 3;
    }
  }

 private:
  std::int64_t n_;
  std::vector<data::Field> fields_{{"input_ids", DType::kInt64, {4}},
                                   {"mask", DType::kFloat32, {4}},
                                   {"label", DType::kInt64, {}}};
};

class TokenData final : public data::DataModule {
 public:
  void setup(data::Stage) override { set_ = std::make_shared<TokenDataset>(12); }
  std::shared_ptr<const data::Dataset> dataset(data::Split split) const override {
    ++asked[static_cast<int>(split)];
    return set_;
  }
  mutable int asked[4] = {0, 0, 0, 0};  // per data::Split
  data::LoaderOptions loaderOptions(data::Split) const override { return {.batch_size = 4}; }
  std::int64_t numClasses() const override { return 3; }
  std::string name() const override { return "TokenData"; }

 private:
  std::shared_ptr<const data::Dataset> set_;
};

// Embeds the ids, zeroes the masked positions, sums them and classifies:
// a forward of two named inputs.
class TokenClassifier final : public LightningModule {
 public:
  std::string typeName() const override { return "TokenClassifier"; }
  void configureModel(nn::InitContext& ctx, const ModelInput& input) override {
    seen = input;
    embed_ = registerModule("embed", std::make_shared<nn::Embedding>(ctx, 16, 8));
    head_ = registerModule("head", std::make_shared<nn::Linear>(ctx, 4 * 8, input.num_classes));
  }
  using Module::forward;
  Tensor forward(const nn::Inputs& in) override {
    const Tensor& ids = in.tensors["input_ids"];
    const std::int64_t n = ids.size(0);
    Tensor h = (*embed_)(ids);  // [n, 4, 8]
    // The mask broadcast over the embedding width by a product with ones [1, 8].
    const Tensor mask = ops::matmul(ops::reshape(in.tensors["mask"], {n, 4, 1}), Tensor::full(ids.device(), {1, 8}, 1.0f));
    return (*head_)(ops::reshape(ops::mul(h, mask), {n, 32}));
  }
  Tensor trainingStep(const Batch& batch, std::int64_t) override {
    EXPECT_EQ(batch["input_ids"].dtype(), DType::kInt64);
    EXPECT_EQ(batch["mask"].dtype(), DType::kFloat32);
    Tensor loss = ops::crossEntropy((*this)(nn::Inputs{batch}), batch["label"]);
    log("train_loss", loss);
    return loss;
  }
  Prediction predictStep(const Batch& batch, std::int64_t batch_idx) override {
    Prediction p;
    for (std::int64_t i = 0; i < batch.size(); ++i)
      p.texts.push_back({"prompt " + std::to_string(batch_idx * 4 + i), "ids " + std::to_string(batch["input_ids"].labels()[i * 4]),
                         {batch["input_ids"].labels()[i * 4]}});
    return p;
  }
  OptimizerConfig configureOptimizers() override { return {optim::makeAdam({.lr = 0.05}), nullptr}; }

  ModelInput seen;

 private:
  std::shared_ptr<nn::Embedding> embed_;
  std::shared_ptr<nn::Linear> head_;
};

TEST(NamedBatches, AModelOfTokenIdsAndAFloatMaskTrainsThroughTheTrainer) {
  TempDir dir;
  device::Platform platform = device::Platform::fromEnv(Environment{{"HPU_EMULATOR_DEVICES", "1"}});
  auto trainer = makeTrainer(dir.path().string(), "{max_epochs: 30, logger: false, enable_checkpointing: false, "
                                         "enable_progress_bar: false, enable_model_summary: true, num_sanity_val_steps: 0}",
                             {}, platform);
  TokenClassifier model;
  TokenData data;
  trainer->fit(model, data, "");
  EXPECT_THAT(model.seen.fields, ElementsAre(data::Field{"input_ids", DType::kInt64, {4}},
                                             data::Field{"mask", DType::kFloat32, {4}}, data::Field{"label", DType::kInt64, {}}));
  EXPECT_EQ(model.seen.sample_shape, (Shape{4}));
  // 12 samples of 3 classes learnt by heart.
  EXPECT_LT(trainer->callbackMetrics().at("train_loss"), 0.05);
  // Every forward went through the hooked two-input call (the head saw the batch).
  EXPECT_EQ(model.children()[1].second->lastOutputShape().str(), "[4, 3]");
}

TEST(NamedBatches, PredictReturnsWhatTheModelReturnsAndTheWriterWritesTextAsJsonLines) {
  TempDir dir;
  device::Platform platform = device::Platform::fromEnv(Environment{{"HPU_EMULATOR_DEVICES", "1"}});
  std::vector<std::unique_ptr<Callback>> callbacks;
  callbacks.push_back(testing::buildComponent<Callback>(config::ComponentKind::kCallback,
                                                        "{class_path: lightning.pytorch.callbacks.BasePredictionWriter, "
                                                        "init_args: {output_dir: " + dir.path().string() + "/out}}",
                                                        "trainer.callbacks"));
  auto trainer = makeTrainer(dir.path().string(), "{logger: false, enable_progress_bar: false}", std::move(callbacks), platform);
  TokenClassifier model;
  TokenData data;
  const std::vector<Prediction> out = trainer->predict(model, data, "");
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1].texts[2].prompt, "prompt 6");
  std::ifstream in(dir.path().string() + "/out/predictions.jsonl");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 12u);
  EXPECT_EQ(lines[6], R"({"completion":"ids 6","prompt":"prompt 6","token_ids":[6]})");
  EXPECT_FALSE(std::filesystem::exists(dir.path().string() + "/out/predictions.csv")) << "no numeric rows were predicted";
}

}  // namespace
}  // namespace hpu::core

namespace hpu::core {
namespace {

// reload_dataloaders_every_n_epochs: the data module is asked for its train
// and val data at the start, then every N epochs (as Lightning calls
// train_dataloader() and val_dataloader() again).
TEST(NamedBatches, DataloadersAreReloadedEveryNEpochs) {
  TempDir dir;
  device::Platform platform = device::Platform::fromEnv(Environment{{"HPU_EMULATOR_DEVICES", "1"}});
  for (const auto& [every, expected] : {std::pair{0, 1}, std::pair{2, 3}, std::pair{1, 5}}) {
    auto trainer = makeTrainer(dir.path().string(),
                               "{max_epochs: 5, logger: false, enable_checkpointing: false, enable_progress_bar: false, "
                               "enable_model_summary: false, num_sanity_val_steps: 0, "
                               "reload_dataloaders_every_n_epochs: " + std::to_string(every) + "}",
                               {}, platform);
    TokenClassifier model;
    TokenData data;
    trainer->fit(model, data, "");
    // setupModel asks for a sample set once more at the start.
    EXPECT_EQ(data.asked[static_cast<int>(data::Split::kTrain)], expected + 1) << "every " << every;
    EXPECT_EQ(data.asked[static_cast<int>(data::Split::kVal)], expected) << "every " << every;
  }
}

}  // namespace
}  // namespace hpu::core
