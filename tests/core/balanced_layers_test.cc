// models::balancedLayers: the pipeline split the model makes when the config
// gives none, balanced by parameters with the embeddings on the first stage
// and the head on the last.
#include <gtest/gtest.h>

#include <numeric>

#include "hpu/core/models/causal_lm.h"

namespace hpu::core::models {
namespace {

// A Llama's shape (config.json's keys).
TransformerConfig llama(std::int64_t vocab, std::int64_t hidden, std::int64_t intermediate, std::int64_t layers,
                        std::int64_t heads, std::int64_t kv_heads) {
  TransformerConfig c;
  c.family = Family::kLlama;
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.intermediate_size = intermediate;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.head_dim = hidden / heads;
  return c;
}

// Llama 2 70B's and Llama 3.1 70B's shapes, which differ in their
// vocabulary: 32,000 rows against 128,256.
TransformerConfig llama70b(std::int64_t vocab) { return llama(vocab, 8192, 28672, 80, 64, 8); }

TEST(BalancedLayersTest, EvenWhenTheEmbeddingsWeighLessThanALayer) {
  // 262M embedding parameters against 856M a layer: 20 layers each.
  EXPECT_EQ(balancedLayers(llama70b(32000), 4), (std::vector<std::int64_t>{20, 20, 20, 20}));
  EXPECT_EQ(balancedLayers(llama70b(32000), 1), (std::vector<std::int64_t>{80}));
}

TEST(BalancedLayersTest, ALargeVocabularyLeavesTheFirstAndLastStagesFewerLayers) {
  // 1,051M embedding parameters, 1.23 layers: 1,051M + 19 x 856M = 17.3B on
  // the first stage, 21 x 856M = 18.0B in the middle; 20 each would put
  // 18.2B on the first.
  EXPECT_EQ(balancedLayers(llama70b(128256), 4), (std::vector<std::int64_t>{19, 21, 21, 19}));
  for (int stages : {2, 5, 8, 16, 80}) {
    const std::vector<std::int64_t> split = balancedLayers(llama70b(128256), stages);
    ASSERT_EQ(split.size(), static_cast<std::size_t>(stages));
    EXPECT_EQ(std::accumulate(split.begin(), split.end(), std::int64_t{0}), 80) << stages << " stages";
    EXPECT_GE(*std::min_element(split.begin(), split.end()), 1) << stages << " stages";
    EXPECT_LE(split.front(), split[split.size() / 2]) << stages << " stages";
  }
}

// A vocabulary of 4,096 rows at hidden size 64 weighs seven layers: the
// head's stage bounds the largest run whatever the middle holds, and the
// middle stages then share their layers evenly (not 1 and 5).
TEST(BalancedLayersTest, MiddleStagesShareTheLayersTheEndsLeave) {
  const TransformerConfig c = llama(4096, 64, 128, 8, 4, 2);
  EXPECT_EQ(balancedLayers(c, 4), (std::vector<std::int64_t>{1, 3, 3, 1}));
  EXPECT_EQ(balancedLayers(c, 2), (std::vector<std::int64_t>{4, 4}));
}

}  // namespace
}  // namespace hpu::core::models
