// BatchNorm2d (torch.nn.BatchNorm2d) per channel of [N, C, H, W]: unit
// weight, zero bias, and running statistics (buffers) updated in training.
#pragma once

#include <spdlog/fmt/fmt.h>

#include <optional>

#include "hpu/core/nn/init.h"
#include "hpu/core/nn/layer.h"
#include "hpu/core/ops/ops.h"

namespace hpu::core::nn {

class BatchNorm2d : public Module {
 public:
  BatchNorm2d(InitContext& ctx, std::int64_t num_features, float eps = 1e-5f, float momentum = 0.1f, bool affine = true)
      : eps_(eps), momentum_(momentum) {
    if (affine) {
      weight = registerParameter("weight", constantInit(ctx, {num_features}, 1.0f));
      bias = registerParameter("bias", constantInit(ctx, {num_features}, 0.0f));
    }
    running_mean = registerBuffer("running_mean", Tensor::zeros(ctx.device, {num_features}));
    running_var = registerBuffer("running_var", Tensor::full(ctx.device, {num_features}, 1.0f));
  }
  std::string typeName() const override { return "BatchNorm2d"; }
  Tensor forward(const Tensor& x) override {
    // torch's momentum None: the factor 1/n makes the running statistics the
    // average of the n batches seen so far.
    const bool track = training() && track_running_stats_;
    const float factor = !track ? 0.0f : momentum_ ? *momentum_ : 1.0f / static_cast<float>(++batches_tracked_);
    return ops::batchNorm2d(x, weight, bias, running_mean, running_var, training(), factor, eps_);
  }
  // nullopt (torch's momentum=None): from the next forward on, the running
  // statistics are the cumulative average of every batch's (the count starts
  // again at 0); a value: the exponential average with that momentum.
  void setMomentum(std::optional<float> momentum) {
    momentum_ = momentum;
    batches_tracked_ = 0;
  }
  std::optional<float> momentum() const { return momentum_; }
  // torch's track_running_stats on a module built with statistics: false
  // keeps them as they are in training (which still normalises with the
  // batch's), as a frozen batch norm does (BaseFinetuning.freeze_module).
  void setTrackRunningStats(bool track) { track_running_stats_ = track; }
  Tensor weight, bias, running_mean, running_var;

 private:
  float eps_;
  std::optional<float> momentum_;
  bool track_running_stats_ = true;
  std::int64_t batches_tracked_ = 0;
};

inline const LayerRegistration kBatchNorm2dLayer{
    torchLayerSchema("BatchNorm2d",
                     {{"eps", config::Type::real().min(0.0, true), "1.0e-05", "Added to the variance."},
                      {"momentum", config::Type::real().min(0.0).max(1.0), "0.1", "Running statistics update factor."},
                      {"affine", config::Type::boolean(), "true", "Learn a scale and a shift."}},
                     "Batch normalisation over [N, C, H, W] per channel."),
    [](const config::Params& p, InitContext& ctx, const Shape& in, const std::string& where) {
      if (in.ndim() != 3)
        layerMisfit(where, fmt::format("BatchNorm2d needs [channels, height, width] inputs; got {}", in.str()));
      return LayerBuild{std::make_shared<BatchNorm2d>(ctx, in[0], static_cast<float>(p.getFloat("eps")),
                                                      static_cast<float>(p.getFloat("momentum")), p.getBool("affine")),
                        in};
    }};

}  // namespace hpu::core::nn
