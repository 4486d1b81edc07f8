// A model written against hpu-train's C++ API and registered so configs can
// name it: the whole recipe for adding your own LightningModule.
//
//   1. Subclass hpu::core::LightningModule: build layers in configureModel()
//      (they live on the device the Trainer picked), say what a step does in
//      trainingStep()/validationStep()/testStep(), log metrics with log(),
//      and return a default optimizer from configureOptimizers().
//   2. Register it with its init_args schema (HPU_REGISTER_COMPONENT below):
//      the config validates them, `--help` lists them, `--print_config`
//      prints them.
//   3. Link it into an executable whose main() is hpu::cli::runCli (this
//      file's main), and run it like hpu-train:
//        build/hpu-train-custom fit --config examples/custom_model.yaml
#include "hpu/cli/app.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/module/lightning_module.h"
#include "hpu/core/nn/layers.h"
#include "hpu/core/ops/autocast.h"
#include "hpu/core/profilers/profiler.h"

namespace {

using namespace hpu::core;

// A residual MLP: x -> h = relu(W1 x); out = W2 (h + relu(W3 h)).
class ResidualMLP final : public LightningModule {
 public:
  explicit ResidualMLP(const config::Params& p) : width_(p.getInt("width")), lr_(p.getFloat("lr")) {}
  std::string typeName() const override { return "ResidualMLP"; }

  void configureModel(nn::InitContext& ctx, const ModelInput& input) override {
    // Children are held through the handles registerChild returns: they
    // follow replacements of the layer (precision: fp8 swaps its Linear layers).
    in_ = registerChild("inp", std::make_shared<nn::Linear>(ctx, input.sample_shape.numel(), width_));
    block_ = registerChild("block", std::make_shared<nn::Linear>(ctx, width_, width_));
    out_ = registerChild("out", std::make_shared<nn::Linear>(ctx, width_, input.num_classes));
  }

  Tensor forward(const Tensor& x) override {
    Tensor h = ops::relu(in_(ops::flatten(x)));
    Tensor r = ops::relu(block_(h));
    // The classifier head always runs in fp32, even under bf16-mixed.
    autocast::Scope fp32(false);
    return out_(ops::add(h, r));
  }

  Tensor trainingStep(const Batch& batch, std::int64_t) override {
    auto scope = profiler().profile("residual_mlp_loss");  // a custom profiler region
    Tensor loss = ops::crossEntropy(forward(batch["x"]), batch["y"]);
    log("train_loss", loss, {.prog_bar = true});
    return loss;
  }

  void validationStep(const Batch& batch, std::int64_t) override {
    Tensor logits = forward(batch["x"]);
    log("val_loss", ops::crossEntropy(logits, batch["y"]), {.prog_bar = true});
    log("val_acc", static_cast<double>(ops::countCorrect(logits, batch["y"])) / static_cast<double>(batch.size()),
        {.prog_bar = true});
  }

  void testStep(const Batch& batch, std::int64_t) override {
    Tensor logits = forward(batch["x"]);
    log("test_acc", static_cast<double>(ops::countCorrect(logits, batch["y"])) / static_cast<double>(batch.size()));
  }

  OptimizerConfig configureOptimizers() override {
    optim::SGDOptions o;
    o.lr = lr_;
    o.momentum = 0.9;
    return {optim::makeSGD(o), optim::makeStepLR(1, 0.5)};
  }

 private:
  std::int64_t width_;
  double lr_;
  nn::Child<nn::Linear> in_, block_, out_;
};

HPU_REGISTER_COMPONENT(LightningModule,
                       config::ComponentSchema{
                           config::ComponentKind::kModel,
                           "ResidualMLP",
                           "examples",
                           {"ResidualMLP",
                            "",
                            {{"width", config::Type::integer().min(1), "128", "Width of the hidden layers."},
                             {"lr", config::Type::real().min(0.0, true), "0.05", "Learning rate of the default SGD."}}},
                           "An example model defined outside the library (examples/custom_model.cc)."},
                       [](const config::Params& p) { return std::make_unique<ResidualMLP>(p); });

}  // namespace

int main(int argc, char** argv, char** envp) { return hpu::cli::runCli(argc, argv, envp); }
