// Checkpoint: activation checkpointing of a block of layers (DeepSpeed's
// checkpoint, torch.utils.checkpoint): their activations are not kept but
// recomputed in backward, with the same dropout masks.
#pragma once

#include "hpu/core/nn/layer.h"
#include "hpu/core/nn/sequential.h"
#include "hpu/core/ops/ops.h"

namespace hpu::core::nn {

class CheckpointBlock final : public Sequential {
 public:
  // `on_host` keeps the saved input in host memory (cpu_checkpointing).
  CheckpointBlock(Generator& rng, bool on_host) : rng_(&rng), on_host_(on_host) {}
  std::string typeName() const override { return "Checkpoint"; }
  std::string describe() const override { return on_host_ ? "inputs kept in host memory" : ""; }
  Tensor forward(const Tensor& x) override {
    return ops::checkpoint([this](const Tensor& in) { return Sequential::forward(in); }, x, rng_, on_host_);
  }

 private:
  Generator* rng_;
  bool on_host_;
};

inline const LayerRegistration kCheckpointLayer{
    config::ComponentSchema{config::ComponentKind::kLayer,
                            "Checkpoint",
                            "",
                            {"Checkpoint",
                             "",
                             {{"layers", config::Type::list(config::Type::component({config::ComponentKind::kLayer})),
                               "[]", "The layers whose activations are recomputed in backward instead of kept."}}},
                            "Activation checkpointing: trades recomputation for activation memory.",
                            {"deepspeed.checkpointing.checkpoint", "torch.utils.checkpoint.checkpoint"}},
    [](const config::Params& p, InitContext& ctx, const Shape& in, const std::string& where) {
      auto block = std::make_shared<CheckpointBlock>(ctx.dropout_rng, ctx.checkpoint_on_host);
      const Shape out = buildLayers(*block, listedLayers(p), ctx, in, where + ".init_args.layers");
      return LayerBuild{block, out};
    }};

}  // namespace hpu::core::nn
