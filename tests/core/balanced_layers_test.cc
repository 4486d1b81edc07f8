// models::balancedLayers: the pipeline split the model makes when the config
// gives none, balanced by parameters with the embeddings on the first stage
// and the head on the last.
#include <gtest/gtest.h>

#include <numeric>

#include "hpu/core/models/causal_lm.h"

namespace hpu::core::models {
namespace {

// Llama 2 70B's and Llama 3.1 70B's shapes (config.json), which differ in
// their vocabulary: 32,000 rows against 128,256.
TransformerConfig llama70b(std::int64_t vocab) {
  TransformerConfig c;
  c.family = Family::kLlama;
  c.vocab_size = vocab;
  c.hidden_size = 8192;
  c.intermediate_size = 28672;
  c.num_hidden_layers = 80;
  c.num_attention_heads = 64;
  c.num_key_value_heads = 8;
  c.head_dim = 128;
  return c;
}

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
  TransformerConfig c;
  c.family = Family::kLlama;
  c.vocab_size = 4096;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_hidden_layers = 8;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  EXPECT_EQ(balancedLayers(c, 4), (std::vector<std::int64_t>{1, 3, 3, 1}));
  EXPECT_EQ(balancedLayers(c, 2), (std::vector<std::int64_t>{4, 4}));
}

}  // namespace
}  // namespace hpu::core::models
