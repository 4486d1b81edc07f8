// Linear (torch.nn.Linear): y = x W^T + b over the last dimension; weight
// [out, in] and bias [out] initialised U(+-1/sqrt(in)), as torch does.
// Split across a tensor-parallel group (Megatron-LM's ColumnParallelLinear
// and RowParallelLinear; ops/parallel.h):
//  - column: each rank holds out / size output features (weight rows, bias)
//    and computes its part of y. Its input must be in the parallel region:
//    the caller calls ops::copyToParallel once for all the layers reading it.
//  - row: each rank holds in / size input features (weight columns), reads
//    its part of a column layer's output, and y is summed over the group,
//    the bias (whole on every rank) added once.
// A column split may pad its output features to a multiple first (an output
// head's vocabulary, VocabularyRows): the padding rows are zero and their
// outputs belong to no class (the loss and generation leave them out). It
// pads on one rank too (a null group): a column split of one piece.
#pragma once

#include <spdlog/fmt/fmt.h>

#include <cmath>
#include <optional>

#include "hpu/core/nn/init.h"
#include "hpu/core/nn/layer.h"
#include "hpu/core/nn/layers/activation.h"
#include "hpu/core/nn/layers/dropout.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/ops/ops.h"
#include "hpu/core/ops/parallel.h"

namespace hpu::core::nn {

enum class ParallelSplit { kNone, kColumn, kRow };

struct LinearParallel {
  ParallelSplit split = ParallelSplit::kNone;
  ops::ParallelGroup* group = nullptr;  // REQUIRES: set unless split is kNone
  // Column split of a weight made of this many equal blocks of outputs,
  // each split alike (fused projections).
  int blocks = 1;
  // Fewer pieces than ranks (grouped-query attention's key/value heads on
  // more ranks than heads): rank r holds piece r / (size / pieces), as do
  // the other ranks of `replicas`, which sums their partial gradients.
  int pieces = 0;  // 0: one piece per rank
  ops::ParallelGroup* replicas = nullptr;
  // Column split: the output features padded to a multiple of this first
  // (REQUIRES: a multiple of parts(); blocks == 1). 1: no padding.
  std::int64_t out_multiple = 1;

  int parts() const { return pieces > 0 ? pieces : group != nullptr ? group->size() : 1; }
  // This rank's piece of a parameter split along `dim` (of `in_blocks` blocks).
  Shard shard(int dim, int in_blocks = 1) const {
    if (split == ParallelSplit::kNone) return {};
    const int index = group != nullptr ? group->rank() / (group->size() / parts()) : 0;
    return {.dim = dim, .parts = parts(), .index = index, .blocks = in_blocks};
  }
  // ", column-parallel x2" (nothing when not split), for model summaries.
  std::string describe() const {
    if (split == ParallelSplit::kNone) return "";
    const std::string padded =
        out_multiple > 1 ? fmt::format(", out_features padded to a multiple of {}", out_multiple) : "";
    if (group == nullptr) return padded;
    return fmt::format(", {}-parallel x{}{}{}", split == ParallelSplit::kColumn ? "column" : "row", parts(),
                       replicas != nullptr ? fmt::format(" (each on {} ranks)", replicas->size()) : "", padded);
  }
  // This rank's share of a split dimension of `features` (`in_blocks`
  // blocks). Throws UsageError naming `what` when the pieces do not divide it.
  std::int64_t local(std::int64_t features, std::string_view what, int in_blocks = 1) const {
    if (features % (parts() * in_blocks) != 0)
      throw UsageError(fmt::format("Linear: {} {} cannot be split across {} tensor-parallel ranks{}", what, features,
                                   parts(), in_blocks > 1 ? fmt::format(" in {} blocks", in_blocks) : ""));
    return features / parts();
  }
  // The column split's piece of `out` output features, padding included,
  // and its shard along `dim`.
  std::int64_t localOut(std::int64_t out, int in_blocks) const {
    return out_multiple > 1 ? paddedRows(out, out_multiple) / parts() : local(out, "out_features", in_blocks);
  }
  Shard outShard(std::int64_t out, int dim, int in_blocks) const {
    if (out_multiple == 1) return shard(dim, in_blocks);
    const Shard piece = shard(dim);
    return Shard::paddedPiece(dim, out, out_multiple, piece.parts, piece.index);
  }
  // This rank's part of a layer of in x out features (whole): its local
  // sizes and the shards of its weight ([out, in], or [in, out] when
  // `weight_in_out`) and bias.
  struct Local {
    std::int64_t in, out;
    Shard weight, bias;
  };
  Local localPart(std::int64_t in, std::int64_t out, bool weight_in_out) const {
    const int out_dim = weight_in_out ? 1 : 0, in_dim = 1 - out_dim;
    switch (split) {
      case ParallelSplit::kColumn:
        return {in, localOut(out, blocks), outShard(out, out_dim, blocks), outShard(out, 0, blocks)};
      case ParallelSplit::kRow:
        return {local(in, "in_features"), out, shard(in_dim), {}};
      case ParallelSplit::kNone:
        break;
    }
    return {in, out, {}, {}};
  }
  // A parameter as the layer's forward reads it: with replicas, a view
  // whose gradient is summed over them.
  Tensor read(const Tensor& p) const {
    return replicas != nullptr && p.defined() ? ops::copyToParallel(p, *replicas) : p;
  }
};

// `split` across `group`; no split when the group is null (no tensor parallelism).
inline LinearParallel splitAcross(ops::ParallelGroup* group, ParallelSplit split) {
  if (group == nullptr) return {};
  return {.split = split, .group = group};
}

class Linear : public Module {
 public:
  // in_features and out_features are the whole layer's.
  Linear(InitContext& ctx, std::int64_t in_features, std::int64_t out_features, bool bias = true,
         LinearParallel parallel = {})
      : parallel_(parallel) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(in_features));
    const LinearParallel::Local p = parallel.localPart(in_features, out_features, /*weight_in_out=*/false);
    weight = registerParameter("weight", uniformInit(ctx, {p.out, p.in}, bound, p.weight), p.weight);
    if (bias) this->bias = registerParameter("bias", uniformInit(ctx, {p.out}, bound, p.bias), p.bias);
  }
  std::string typeName() const override { return "Linear"; }
  std::string describe() const override {
    const Shape full = ownParameters().front().shard.fullShape(weight.shape());
    return fmt::format("in_features={}, out_features={}, bias={}{}", full[1], full[0], bias.defined(),
                       parallel_.describe());
  }
  Tensor forward(const Tensor& x) override {
    if (parallel_.split == ParallelSplit::kRow)
      return ops::fromParallelRegion(ops::linear(x, weight, Tensor()), *parallel_.group, bias);
    return ops::linear(x, parallel_.read(weight), parallel_.read(bias));
  }
  const LinearParallel& parallel() const { return parallel_; }
  // With a ReLU after it, and a Dropout after that: ops::linearRelu.
  std::size_t fusesWith(std::span<Module* const> next) const override {
    if (parallel_.split != ParallelSplit::kNone) return 0;
    const auto* act = next.empty() ? nullptr : dynamic_cast<const Activation*>(next[0]);
    if (act == nullptr || act->kind() != ActivationKind::kReLU) return 0;
    return next.size() > 1 && dynamic_cast<const Dropout*>(next[1]) != nullptr ? 2 : 1;
  }
  Tensor forwardFused(std::span<Module* const> fused, const Tensor& x, Shape& own_output) override {
    std::optional<ops::FusedDropout> dropout;
    if (fused.size() > 1) {
      const auto& d = dynamic_cast<const Dropout&>(*fused[1]);
      dropout = ops::FusedDropout{d.p(), d.training(), &d.rng()};
    }
    Tensor y = ops::linearRelu(x, weight, bias, {}, dropout);
    own_output = y.shape();
    return y;
  }

  Tensor weight, bias;

 private:
  LinearParallel parallel_;
};

inline const LayerRegistration kLinearLayer{
    torchLayerSchema("Linear",
                     {{"out_features", config::Type::integer().min(1), "null", "Output features."},
                      {"in_features", config::Type::optional(config::Type::integer().min(1)), "null",
                       "Input features (inferred; checked if given)."},
                      {"bias", config::Type::boolean(), "true", "Learn an additive bias."}},
                     "Fully connected layer over the last dimension."),
    [](const config::Params& p, InitContext& ctx, const Shape& in, const std::string& where) {
      const std::int64_t features = in[-1];
      if (p.has("in_features") && p.getInt("in_features") != features)
        layerMisfit(where, fmt::format("in_features is {} but the previous layer gives {} features ({} per sample)",
                                       p.getInt("in_features"), features, in.str()));
      Shape out = in;
      out[-1] = p.getInt("out_features");
      return LayerBuild{std::make_shared<Linear>(ctx, features, out[-1], p.getBool("bias")), out};
    }};

}  // namespace hpu::core::nn
