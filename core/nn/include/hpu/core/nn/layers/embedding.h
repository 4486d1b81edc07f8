// Embedding (torch.nn.Embedding): a [num_embeddings, embedding_dim] table,
// initialised N(0, 1), looked up by int64 indices.
#pragma once

#include <vector>

#include "hpu/core/nn/init.h"
#include "hpu/core/nn/layer.h"
#include "hpu/core/ops/ops.h"

namespace hpu::core::nn {

class Embedding : public Module {
 public:
  Embedding(InitContext& ctx, std::int64_t num_embeddings, std::int64_t embedding_dim) {
    weight = registerParameter("weight", normalInit(ctx, {num_embeddings, embedding_dim}));
  }
  std::string typeName() const override { return "Embedding"; }
  Tensor forward(const Tensor& indices) override { return ops::embedding(indices, weight); }
  Tensor weight;
};

inline const LayerRegistration kEmbeddingLayer{
    layerSchema("Embedding",
                {{"num_embeddings", config::Type::integer().min(1), "null", "Rows of the table (the vocabulary)."},
                 {"embedding_dim", config::Type::integer().min(1), "null", "Width of each row."}},
                "Looks up int64 indices in a table of vectors."),
    [](const config::Params& p, InitContext& ctx, const Shape& in, const std::string&) {
      std::vector<std::int64_t> out(in.dims().begin(), in.dims().end());
      out.push_back(p.getInt("embedding_dim"));
      return LayerBuild{std::make_shared<Embedding>(ctx, p.getInt("num_embeddings"), p.getInt("embedding_dim")),
                        Shape(std::span<const std::int64_t>(out))};
    }};

}  // namespace hpu::core::nn
