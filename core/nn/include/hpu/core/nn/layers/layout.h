// Layout layers: Reshape (each sample to a new shape), Transpose and Permute
// (torch.Tensor.transpose / permute as layers). Dimensions of Transpose and
// Permute count the batch as 0, as torch's do; the batch stays first.
#pragma once

#include <spdlog/fmt/fmt.h>
#include <spdlog/fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <vector>

#include "hpu/core/nn/layer.h"
#include "hpu/core/ops/ops.h"

namespace hpu::core::nn {

// Reshapes each sample of x [B, ...] to `sample` (x's batch kept).
class Reshape : public Module {
 public:
  explicit Reshape(const Shape& sample) : sample_(sample) {}
  std::string typeName() const override { return "Reshape"; }
  std::string describe() const override { return sample_.str(); }
  Tensor forward(const Tensor& x) override {
    std::vector<std::int64_t> dims{x.size(0)};
    dims.insert(dims.end(), sample_.dims().begin(), sample_.dims().end());
    return ops::reshape(x, Shape(std::span<const std::int64_t>(dims)));
  }

 private:
  Shape sample_;
};

// Reorders x's dimensions: output dimension i is x's perm[i] (perm[0] == 0).
class Permute : public Module {
 public:
  explicit Permute(std::vector<int> perm) : perm_(std::move(perm)) {}
  std::string typeName() const override { return "Permute"; }
  std::string describe() const override { return fmt::format("{}", fmt::join(perm_, ", ")); }
  Tensor forward(const Tensor& x) override { return ops::permute(x, perm_); }

 private:
  std::vector<int> perm_;
};

// `dim` of a [batch, sample...] tensor of rank `rank` from a layer's
// init_args, negative counting from the end; refuses the batch dimension
// and dimensions out of range, naming the layer.
inline int layoutDim(std::int64_t dim, int rank, const std::string& where, const Shape& in) {
  const std::int64_t d = dim < 0 ? dim + rank : dim;
  if (d < 1 || d >= rank)
    layerMisfit(where, fmt::format("dimension {} is {} for a [batch, {}] input; give 1 .. {} (or -1 .. -{})", dim,
                                   d == 0 ? "the batch, which stays first" : "out of range", fmt::join(in.dims(), ", "),
                                   rank - 1, rank - 1));
  return static_cast<int>(d);
}

inline Shape permutedSample(const Shape& in, const std::vector<int>& perm) {
  std::vector<std::int64_t> out;
  for (std::size_t i = 1; i < perm.size(); ++i) out.push_back(in[perm[i] - 1]);
  return Shape(std::span<const std::int64_t>(out));
}

inline const LayerRegistration kReshapeLayer{
    layerSchema("Reshape",
                {{"shape", config::Type::list(config::Type::integer().min(-1)), "null",
                  "Each sample's new shape, without the batch dimension; one entry may be -1 (inferred)."}},
                "Reshapes each sample (keeps the batch dimension)."),
    [](const config::Params& p, InitContext&, const Shape& in, const std::string& where) {
      const std::vector<std::int64_t> given = p.getIntList("shape");
      const auto misfit = [&] {
        layerMisfit(where, fmt::format("Reshape: a {} sample ({} values) cannot be shaped [{}]", in.str(), in.numel(),
                                       fmt::join(given, ", ")));
      };
      if (given.empty() || static_cast<int>(given.size()) >= Shape::kMaxDims)
        layerMisfit(where, fmt::format("Reshape: give 1 .. {} dimensions", Shape::kMaxDims - 1));
      if (std::count(given.begin(), given.end(), -1) > 1) layerMisfit(where, "Reshape: more than one dimension is -1");
      std::vector<std::int64_t> shape = given;
      const auto inferred = std::find(shape.begin(), shape.end(), -1);
      if (inferred != shape.end()) {
        const std::int64_t known = -std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
        if (known == 0 || in.numel() % known != 0) misfit();
        *inferred = in.numel() / known;
      }
      const Shape out{std::span<const std::int64_t>(shape)};
      if (out.numel() != in.numel()) misfit();
      return LayerBuild{std::make_shared<Reshape>(out), out};
    }};

inline const LayerRegistration kTransposeLayer{
    layerSchema(
        "Transpose",
        {{"dim0", config::Type::integer(), "null", "A dimension (the batch is 0; negative counts from the end)."},
         {"dim1", config::Type::integer(), "null", "The dimension to swap it with."}},
        "Swaps two dimensions (torch.Tensor.transpose)."),
    [](const config::Params& p, InitContext&, const Shape& in, const std::string& where) {
      const int rank = in.ndim() + 1;
      std::vector<int> perm(static_cast<std::size_t>(rank));
      std::iota(perm.begin(), perm.end(), 0);
      std::swap(perm[layoutDim(p.getInt("dim0"), rank, where, in)], perm[layoutDim(p.getInt("dim1"), rank, where, in)]);
      const Shape out = permutedSample(in, perm);
      return LayerBuild{std::make_shared<Permute>(perm), out};
    }};

inline const LayerRegistration kPermuteLayer{
    layerSchema("Permute",
                {{"dims", config::Type::list(config::Type::integer()), "null",
                  "Output dimension i is input dimension dims[i]; the batch (0) stays first."}},
                "Reorders dimensions (torch.Tensor.permute)."),
    [](const config::Params& p, InitContext&, const Shape& in, const std::string& where) {
      const int rank = in.ndim() + 1;
      const std::vector<std::int64_t> dims = p.getIntList("dims");
      if (static_cast<int>(dims.size()) != rank || dims[0] != 0)
        layerMisfit(where, fmt::format("Permute: dims [{}] must list all {} dimensions of a [batch, {}] input, 0 first",
                                       fmt::join(dims, ", "), rank, fmt::join(in.dims(), ", ")));
      std::vector<int> perm{0};
      std::vector<bool> seen(static_cast<std::size_t>(rank), false);
      for (std::size_t i = 1; i < dims.size(); ++i) {
        const int d = layoutDim(dims[i], rank, where, in);
        if (seen[static_cast<std::size_t>(d)])
          layerMisfit(where, fmt::format("Permute: dims [{}] repeat dimension {}", fmt::join(dims, ", "), d));
        seen[static_cast<std::size_t>(d)] = true;
        perm.push_back(d);
      }
      const Shape out = permutedSample(in, perm);
      return LayerBuild{std::make_shared<Permute>(perm), out};
    }};

}  // namespace hpu::core::nn
