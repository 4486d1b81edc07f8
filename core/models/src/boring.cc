// BoringModel: Lightning's test model. One Linear(32, 2) layer trained to
// output ones (MSE loss) on RandomDataModule's Gaussian noise, with SGD(lr=0.1).
#include "hpu/core/base/errors.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/module/lightning_module.h"
#include "hpu/core/nn/layers.h"

namespace hpu::core::models {
namespace {

class BoringModel final : public LightningModule {
 public:
  explicit BoringModel(const config::Params& p) : out_(p.getInt("out_features")), lr_(p.getFloat("lr")) {}
  std::string typeName() const override { return "BoringModel"; }

  void configureModel(nn::InitContext& ctx, const ModelInput& input) override {
    if (input.sample_shape.ndim() != 1)
      throw UsageError("BoringModel needs vector samples; the data has " + input.sample_shape.str() +
                       " (use RandomDataModule)");
    layer_ = registerModule("layer", std::make_shared<nn::Linear>(ctx, input.sample_shape[0], out_));
  }
  Tensor forward(const Tensor& x) override { return (*layer_)(x); }
  Tensor trainingStep(const Batch& batch, std::int64_t) override {
    Tensor loss = step(batch);
    log("train_loss", loss, {.prog_bar = true});
    return loss;
  }
  void validationStep(const Batch& batch, std::int64_t) override { log("val_loss", step(batch)); }
  void testStep(const Batch& batch, std::int64_t) override { log("test_loss", step(batch)); }
  // The layer's three GEMMs (forward, input and weight gradients): 2·in·out each per sample.
  std::optional<double> flopsPerBatch(std::int64_t batch_size) const override {
    return 6.0 * static_cast<double>(layer_->numParameters() - out_) * static_cast<double>(batch_size);
  }
  OptimizerConfig configureOptimizers() override {
    optim::SGDOptions o;
    o.lr = lr_;
    return {optim::makeSGD(o), nullptr};
  }

 private:
  Tensor step(const Batch& batch) {
    Tensor out = forward(batch["x"]);
    return ops::mseLoss(out, Tensor::full(out.device(), out.shape(), 1.0f));
  }

  std::int64_t out_;
  double lr_;
  std::shared_ptr<nn::Linear> layer_;
};

HPU_REGISTER_COMPONENT(LightningModule,
                       config::ComponentSchema{
                           config::ComponentKind::kModel,
                           "BoringModel",
                           "lightning.pytorch.demos.boring_classes",
                           {"BoringModel",
                            "",
                            // Lightning's BoringModel takes no arguments: both keys are hpu-train's own.
                            {{"out_features", config::Type::integer().min(1), "2", "Outputs of the linear layer.", "",
                              true},
                             {"lr", config::Type::real().min(0.0, true), "0.1", "Learning rate of the default SGD.", "",
                              true}}},
                           "Lightning's BoringModel: Linear(32, 2) pushed towards ones; for smoke tests."},
                       [](const config::Params& p) { return std::make_unique<BoringModel>(p); });

}  // namespace
}  // namespace hpu::core::models
