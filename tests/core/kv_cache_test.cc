// The KV cache's two allocations: whole up front (optimum-habana's
// --reuse_cache) or the prompt's rows first and a pad to the whole capacity
// at the first new token (its default). Memory is counted in fp32 bytes: 2
// layers, batch 2, 2 kv heads, head_dim 4 and capacity 8: one layer's keys
// (or values) are 2 x 2 x 8 x 4 x 4 = 512 bytes whole, 192 at a 3-token
// prompt.
#include "hpu/core/nn/kv_cache.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "hpu/core/base/errors.h"
#include "hpu/device/platform.h"
#include "hpu/env/environment.h"

namespace hpu::core {
namespace {

class KVCacheMemory : public ::testing::Test {
 protected:
  // Keys (values: negated) of `tokens` positions counting from `first`, so
  // every row says where it came from: element (b, h, t, d) = 1000 b + 100 h
  // + 10 (first + t) + d + 1.
  std::pair<Tensor, Tensor> step(std::int64_t first, std::int64_t tokens) {
    std::vector<float> k, v;
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t h = 0; h < 2; ++h)
        for (std::int64_t t = 0; t < tokens; ++t)
          for (std::int64_t d = 0; d < 4; ++d) {
            k.push_back(static_cast<float>(1000 * b + 100 * h + 10 * (first + t) + d + 1));
            v.push_back(-k.back());
          }
    return {Tensor::fromHost(dev(), {2, 2, tokens, 4}, k), Tensor::fromHost(dev(), {2, 2, tokens, 4}, v)};
  }
  // Runs one forward's appends over both layers.
  void forward(nn::KVCache& cache, std::int64_t tokens) {
    const auto [k, v] = step(cache.length(), tokens);
    for (std::int64_t layer = 0; layer < 2; ++layer) cache.append(layer, k, v);
    cache.advance(tokens);
  }
  std::uint64_t inUse() const { return dev().allocator().stats().inUse - base_; }
  std::uint64_t peak() const { return dev().allocator().stats().maxInUse - base_; }
  void resetPeak() { dev().allocator().resetPeakStats(); }
  device::Device& dev() const { return platform_.device(0); }

  mutable device::Platform platform_ = device::Platform::fromEnv(Environment{{"HPU_EMULATOR_DEVICES", "1"}});
  std::uint64_t base_ = dev().allocator().stats().inUse;
};

TEST_F(KVCacheMemory, WholeUpFrontHoldsEveryRowBeforeThePrompt) {
  nn::KVCache cache(dev(), 2, 2, 2, 8, 4, DType::kFloat32, 0, nn::KVCacheAllocation::kWhole);
  EXPECT_EQ(inUse(), 2u * 2 * 512);
  EXPECT_EQ(cache.rows(0), 8);
  forward(cache, 3);
  forward(cache, 1);
  EXPECT_EQ(inUse(), 2u * 2 * 512);
  EXPECT_EQ(cache.attendedRows(1, 4), 8);
}

TEST_F(KVCacheMemory, PromptFirstHoldsThePromptThenPadsALayerAtATime) {
  nn::KVCache cache(dev(), 2, 2, 2, 8, 4, DType::kFloat32, 0, nn::KVCacheAllocation::kPromptFirst);
  EXPECT_EQ(inUse(), 0u);
  forward(cache, 3);
  EXPECT_EQ(inUse(), 2u * 2 * 192) << "the prompt's rows only";
  EXPECT_EQ(cache.rows(0), 3);
  EXPECT_EQ(cache.attendedRows(0, 3), 3);
  resetPeak();
  forward(cache, 1);
  EXPECT_EQ(inUse(), 2u * 2 * 512) << "padded to the whole capacity";
  // At the last pad: the whole cache, layer 1's values' prompt rows beside
  // their whole new tensor, and the step's own keys and values (2 x 64).
  EXPECT_EQ(peak(), 2u * 2 * 512 + 192 + 2 * 64);
  forward(cache, 4);
  EXPECT_EQ(inUse(), 2u * 2 * 512) << "no pad after the first";
  EXPECT_EQ(cache.length(), 8);
}

TEST_F(KVCacheMemory, BothAllocationsHoldTheSameRows) {
  nn::KVCache whole(dev(), 2, 2, 2, 8, 4, DType::kFloat32, 4, nn::KVCacheAllocation::kWhole);
  nn::KVCache padded(dev(), 2, 2, 2, 8, 4, DType::kFloat32, 4, nn::KVCacheAllocation::kPromptFirst);
  for (nn::KVCache* c : {&whole, &padded}) {
    forward(*c, 3);
    forward(*c, 1);
  }
  const auto [k, v] = step(4, 1);
  const auto [wk, wv] = whole.append(1, k, v);
  const auto [pk, pv] = padded.append(1, k, v);
  EXPECT_EQ(wk.toHost(), pk.toHost());
  EXPECT_EQ(wv.toHost(), pv.toHost());
  // Row 2 of batch 1, head 1 is the prompt's third token; row 4 the new one; 5.. are zero.
  const std::vector<float> keys = pk.toHost();
  const auto at = [&](std::int64_t b, std::int64_t h, std::int64_t t) { return keys[((b * 2 + h) * 8 + t) * 4]; };
  EXPECT_EQ(at(1, 1, 2), 1121.0f);
  EXPECT_EQ(at(1, 1, 4), 1141.0f);
  EXPECT_EQ(at(1, 1, 5), 0.0f);
  EXPECT_EQ(padded.attendedRows(1, 5), 8) << "5 filled rows round up to the bucket of 4";
  EXPECT_EQ(padded.attendedRows(1, 3), 4);
}

TEST_F(KVCacheMemory, AFullCacheRefusesMoreTokens) {
  nn::KVCache cache(dev(), 2, 2, 2, 8, 4, DType::kFloat32, 0, nn::KVCacheAllocation::kPromptFirst);
  forward(cache, 6);
  const auto [k, v] = step(6, 3);
  try {
    cache.append(0, k, v);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "the KV cache holds 8 tokens; 1 more do not fit (raise max_new_tokens' room: the cache is sized "
                 "prompt + max_new_tokens)");
  }
}

}  // namespace
}  // namespace hpu::core
