// What the core suites that run the real Trainer in-process share: a
// Trainer built from a trainer section in YAML, and a small image
// classifier with batch norm on twelve fixed samples.
#pragma once

#include <gmock/gmock.h>

#include <memory>
#include <string>
#include <vector>

#include "hpu/core/app/root.h"
#include "hpu/core/nn/layers.h"
#include "hpu/core/trainer/trainer.h"
#include "test_support.h"

namespace hpu::core::testing {

// A Trainer writing under `root`, with the options of `trainer_yaml` and
// `callbacks` (no others: the config adds none), on `strategy` (default:
// one device).
inline std::unique_ptr<Trainer> makeTrainer(const std::string& root, const std::string& trainer_yaml,
                                            std::vector<std::unique_ptr<Callback>> callbacks,
                                            device::Platform& platform, std::unique_ptr<Strategy> strategy = nullptr) {
  std::vector<std::string> problems;
  config::Node trainer = config::normalize(config::loadYamlString(trainer_yaml, "test.yaml"),
                                           config::Type::structure(&config::trainerSchema()), "trainer", problems);
  EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);
  TrainerParts parts;
  parts.options = TrainerOptions::parse(trainer);
  parts.options.default_root_dir = root;
  parts.strategy = strategy ? std::move(strategy) : makeSingleDeviceStrategy(0);
  parts.strategy->setup(RunEnvironment{}, platform);
  parts.callbacks = std::move(callbacks);
  parts.config = config::Node::map();
  parts.config.set("model", config::loadYamlString("{init_args: {}}", "test.yaml"));
  return std::make_unique<Trainer>(std::move(parts));
}

// What a tuner must leave as it found it: parameters, buffers, optimizer
// state, step counts and lr.
struct State {
  std::vector<std::vector<float>> tensors;  // parameters, buffers, optimizer state
  std::int64_t optimizer_steps, global_step;
  double lr;
  bool operator==(const State&) const = default;
};

inline State stateOf(Trainer& t) {
  State s{{}, t.optimizer()->stepCount(), t.globalStep(), t.optimizer()->lr()};
  for (const auto& p : t.model().namedParameters()) s.tensors.push_back(p.tensor.toHost());
  for (const auto& b : t.model().namedBuffers()) s.tensors.push_back(b.tensor.toHost());
  for (const auto& o : t.optimizer()->stateBuffers()) s.tensors.emplace_back(o.values.begin(), o.values.end());
  return s;
}

// Twelve images [2, 1, 3] (two channels of three pixels) with labels 0..2:
// sample i, channel c, pixel j holds sin(1.7 i + 2.3 c + 0.9 j) + c.
class SmallImages final : public data::Dataset {
 public:
  static float pixel(std::int64_t i, std::int64_t c, std::int64_t j) {
    return std::sin(1.7f * static_cast<float>(i) + 2.3f * static_cast<float>(c) + 0.9f * static_cast<float>(j)) +
           static_cast<float>(c);
  }
  std::int64_t size() const override { return 12; }
  const std::vector<data::Field>& fields() const override { return fields_; }
  void fetch(std::span<const std::int64_t> indices, std::span<const data::FieldBuffer> out) const override {
    for (std::size_t s = 0; s < indices.size(); ++s) {
      for (std::int64_t c = 0; c < 2; ++c)
        for (std::int64_t j = 0; j < 3; ++j) out[0].floats[s * 6 + static_cast<std::size_t>(c * 3 + j)] = pixel(indices[s], c, j);
      out[1].ints[s] = indices[s] % 3;
    }
  }

 private:
  std::vector<data::Field> fields_{{"x", DType::kFloat32, {2, 1, 3}}, {"y", DType::kInt64, {}}};
};

// SmallImages for every split, in batches of 4 in order.
class SmallImagesData final : public data::DataModule {
 public:
  void setup(data::Stage) override {}
  std::shared_ptr<const data::Dataset> dataset(data::Split) const override { return set_; }
  data::LoaderOptions loaderOptions(data::Split) const override { return {.batch_size = 4}; }
  std::int64_t numClasses() const override { return 3; }
  std::string name() const override { return "SmallImagesData"; }

 private:
  std::shared_ptr<const data::Dataset> set_ = std::make_shared<SmallImages>();
};

// BatchNorm2d over the input, then a linear classifier; SGD with lr 0.1 and
// momentum 0.9.
class BatchNormClassifier final : public LightningModule {
 public:
  std::string typeName() const override { return "BatchNormClassifier"; }
  void configureModel(nn::InitContext& ctx, const ModelInput& input) override {
    bn = registerModule("bn", std::make_shared<nn::BatchNorm2d>(ctx, 2));
    head_ = registerModule("head", std::make_shared<nn::Linear>(ctx, 6, input.num_classes));
  }
  using Module::forward;
  Tensor forward(const Tensor& x) override { return (*head_)(ops::flatten((*bn)(x))); }
  Tensor trainingStep(const Batch& batch, std::int64_t) override {
    Tensor loss = ops::crossEntropy(forward(batch["x"]), batch["y"]);
    log("train_loss", loss);
    return loss;
  }
  OptimizerConfig configureOptimizers() override { return {optim::makeSGD({.lr = 0.1, .momentum = 0.9}), nullptr}; }

  std::shared_ptr<nn::BatchNorm2d> bn;

 private:
  std::shared_ptr<nn::Linear> head_;
};

}  // namespace hpu::core::testing
