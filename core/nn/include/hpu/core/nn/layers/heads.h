// SplitHeads and MergeHeads: attention's head layout as layers, [B, T, H * D]
// to [B, H, T, D] and back (ops::splitHeads / mergeHeads).
#pragma once

#include <spdlog/fmt/fmt.h>

#include "hpu/core/nn/layer.h"
#include "hpu/core/ops/ops.h"

namespace hpu::core::nn {

class SplitHeads : public Module {
 public:
  explicit SplitHeads(std::int64_t heads) : heads_(heads) {}
  std::string typeName() const override { return "SplitHeads"; }
  std::string describe() const override { return fmt::format("num_heads={}", heads_); }
  Tensor forward(const Tensor& x) override { return ops::splitHeads(x, heads_); }

 private:
  std::int64_t heads_;
};

class MergeHeads : public Module {
 public:
  std::string typeName() const override { return "MergeHeads"; }
  Tensor forward(const Tensor& x) override { return ops::mergeHeads(x); }
};

inline const LayerRegistration kSplitHeadsLayer{
    layerSchema("SplitHeads", {{"num_heads", config::Type::integer().min(1), "null", "Heads to split into."}},
                "[T, H * D] per sample to [H, T, D]."),
    [](const config::Params& p, InitContext&, const Shape& in, const std::string& where) {
      const std::int64_t heads = p.getInt("num_heads");
      if (in.ndim() != 2 || in[1] % heads != 0)
        layerMisfit(where, fmt::format("SplitHeads needs [tokens, features] samples with features a multiple of "
                                       "num_heads {}; got {}",
                                       heads, in.str()));
      return LayerBuild{std::make_shared<SplitHeads>(heads), Shape{heads, in[0], in[1] / heads}};
    }};

inline const LayerRegistration kMergeHeadsLayer{
    layerSchema("MergeHeads", {}, "[H, T, D] per sample to [T, H * D]."),
    [](const config::Params&, InitContext&, const Shape& in, const std::string& where) {
      if (in.ndim() != 3)
        layerMisfit(where, fmt::format("MergeHeads needs [heads, tokens, head_dim] samples; got {}", in.str()));
      return LayerBuild{std::make_shared<MergeHeads>(), Shape{in[1], in[0] * in[2]}};
    }};

}  // namespace hpu::core::nn
