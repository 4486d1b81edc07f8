// Embedding (torch.nn.Embedding): a [num_embeddings, embedding_dim] table,
// initialised N(0, 1), looked up by int64 indices. The row padding_idx (if
// any) starts at zero and learns nothing, as torch's. Split across a
// tensor-parallel group (Megatron-LM's VocabParallelEmbedding), each rank
// holds its rows of the vocabulary (padded to a multiple first:
// VocabularyRows) and the lookup is summed over the group.
#pragma once

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "hpu/core/base/errors.h"
#include "hpu/core/nn/init.h"
#include "hpu/core/nn/layer.h"
#include "hpu/core/nn/vocabulary_rows.h"
#include "hpu/core/ops/ops.h"
#include "hpu/core/ops/parallel.h"

namespace hpu::core::nn {

class Embedding : public Module {
 public:
  Embedding(InitContext& ctx, std::int64_t num_embeddings, std::int64_t embedding_dim,
            std::optional<std::int64_t> padding_idx = std::nullopt, float std = 1.0f, VocabularyRows vocabulary = {})
      : padding_idx(padding_idx), vocab_(num_embeddings), vocabulary_(vocabulary) {
    if (padding_idx && (*padding_idx < 0 || *padding_idx >= num_embeddings))
      throw UsageError(
          fmt::format("Embedding: padding_idx {} is not a row of the {} embeddings", *padding_idx, num_embeddings));
    const Shard shard = vocabulary.shard(num_embeddings);
    const std::int64_t rows = vocabulary.localRows(num_embeddings);
    start_ = vocabulary.start(num_embeddings);
    weight = registerParameter("weight", normalInit(ctx, {rows, embedding_dim}, std, shard), shard);
    const std::int64_t padding_row = padding_idx ? *padding_idx - start_ : -1;
    if (padding_row >= 0 && padding_row < rows && !weight.shapeOnly())
      std::fill_n(weight.data() + padding_row * embedding_dim, embedding_dim, 0.0f);
  }
  std::string typeName() const override { return "Embedding"; }
  std::string describe() const override {
    const std::int64_t padded = vocabulary_.padded(vocab_);
    return fmt::format("{}, {}{}{}{}", vocab_, weight.size(1),
                       padding_idx ? fmt::format(", padding_idx={}", *padding_idx) : "",
                       vocabulary_.parts() > 1 ? fmt::format(", vocab-parallel x{}", vocabulary_.parts()) : "",
                       padded != vocab_ ? fmt::format(", padded to {} rows", padded) : "");
  }
  Tensor forward(const Tensor& indices) override {
    if (weight.size(0) == vocab_) return ops::embedding(indices, weight, padding_idx);
    const Tensor mine = ops::vocabShardEmbedding(indices, weight, start_, vocab_, padding_idx);
    return vocabulary_.parts() > 1 ? ops::reduceFromParallel(mine, *vocabulary_.group) : mine;
  }
  Tensor weight;
  std::optional<std::int64_t> padding_idx;

 private:
  std::int64_t vocab_;
  VocabularyRows vocabulary_;
  std::int64_t start_ = 0;
};

inline const LayerRegistration kEmbeddingLayer{
    torchLayerSchema("Embedding",
                     {{"num_embeddings", config::Type::integer().min(1), "null", "Rows of the table (the vocabulary)."},
                      {"embedding_dim", config::Type::integer().min(1), "null", "Width of each row."},
                      {"padding_idx", config::Type::optional(config::Type::integer().min(0)), "null",
                       "A row that stays zero and learns nothing (padding tokens)."}},
                     "Looks up int64 indices in a table of vectors."),
    [](const config::Params& p, InitContext& ctx, const Shape& in, const std::string&) {
      std::vector<std::int64_t> out(in.dims().begin(), in.dims().end());
      out.push_back(p.getInt("embedding_dim"));
      std::optional<std::int64_t> padding;
      if (p.has("padding_idx")) padding = p.getInt("padding_idx");
      return LayerBuild{
          std::make_shared<Embedding>(ctx, p.getInt("num_embeddings"), p.getInt("embedding_dim"), padding),
          Shape(std::span<const std::int64_t>(out))};
    }};

}  // namespace hpu::core::nn
