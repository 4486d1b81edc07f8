// Pricing of recorded ops (core/estimate/op_costs): which product each op's
// operand shapes describe, and the engine, FLOPs and seconds that follow
// from the Gaudi model's own formulas (tested in gaudi_model_test.cc).
#include "hpu/core/estimate/op_costs.h"

#include <gtest/gtest.h>

#include <vector>

namespace hpu::core::estimate {
namespace {

using device::DType;
using device::GaudiModel;
using device::OperandInfo;

// Operand infos over shapes that outlive them.
struct Operands {
  std::vector<std::vector<std::int64_t>> shapes;
  std::vector<DType> dtypes;
  std::vector<OperandInfo> infos() const {
    std::vector<OperandInfo> out;
    for (std::size_t i = 0; i < shapes.size(); ++i) out.push_back({shapes[i], dtypes[i]});
    return out;
  }
};

const GaudiModel& gaudi2() {
  static const GaudiModel m(device::Generation::kGaudi2, {});
  return m;
}

TEST(OpCosts, LinearIsOneProductOverEveryLeadingDimension) {
  // x [2, 4096, 4096] by w [11008, 4096]: 8192 x 11008 x 4096.
  const Operands o{{{2, 4096, 4096}, {11008, 4096}}, {DType::kBFloat16, DType::kBFloat16}};
  const OpCost c = forwardCost(gaudi2(), "linear", o.infos());
  EXPECT_EQ(c.engine, Engine::kMatrix);
  EXPECT_EQ(c.flops, 2.0 * 8192 * 11008 * 4096);
  EXPECT_EQ(c.seconds, gaudi2().matrixSeconds(1, 8192, 11008, 4096, DType::kBFloat16, DType::kBFloat16));
  // Conv1D's [in, out] weight is the same product.
  const Operands conv1d{{{2, 4096, 4096}, {4096, 11008}}, {DType::kBFloat16, DType::kBFloat16}};
  EXPECT_EQ(forwardCost(gaudi2(), "linear", conv1d.infos()).flops, c.flops);
  // Backward: dX and dW, two products of the forward's size.
  EXPECT_EQ(backwardCost("linear", c).flops, 2 * c.flops);
  EXPECT_EQ(backwardCost("linear", c).seconds, 2 * c.seconds);
}

TEST(OpCosts, Fp8ProductsRunAtTheFp8PeakAndWriteBf16) {
  const Operands o{{{8192, 4096}, {4096, 4096}}, {DType::kFloat8E4M3, DType::kFloat8E4M3}};
  const OpCost c = forwardCost(gaudi2(), "fp8_linear", o.infos());
  EXPECT_EQ(c.seconds, gaudi2().matrixSeconds(1, 8192, 4096, 4096, DType::kFloat8E4M3, DType::kBFloat16));
}

TEST(OpCosts, ConvolutionsAreImplicitGemmsOverTheirOutputPixels) {
  // x [8, 64, 56, 56], w [128, 64, 3, 3], stride 2: y [8, 128, 28, 28], a
  // product of 8 x 28 x 28 pixels by 128 outputs over 64 x 9.
  const Operands o{{{8, 64, 56, 56}, {128, 64, 3, 3}, {128}, {8, 128, 28, 28}},
                   {DType::kBFloat16, DType::kBFloat16, DType::kBFloat16, DType::kBFloat16}};
  const OpCost c = forwardCost(gaudi2(), "conv2d", o.infos());
  EXPECT_EQ(c.engine, Engine::kMatrix);
  EXPECT_EQ(c.flops, 2.0 * 8 * 28 * 28 * 128 * 64 * 9);
}

TEST(OpCosts, CausalAttentionSkipsTheMaskedHalfAndDecodingReadsTheWholeCache) {
  // q, k, v [2, 32, 4096, 128]: Q K^T and P V, half of each under the mask.
  const Operands prefill{{{2, 32, 4096, 128}, {2, 32, 4096, 128}, {2, 32, 4096, 128}},
                         {DType::kBFloat16, DType::kBFloat16, DType::kBFloat16}};
  const OpCost c = forwardCost(gaudi2(), "scaled_dot_product_attention", prefill.infos());
  EXPECT_EQ(c.flops, 2.0 * 64 * 4096 * 4096 * 128);
  // FlashAttention's backward: five products against the forward's two.
  EXPECT_EQ(backwardCost("scaled_dot_product_attention", c).flops, 2.5 * c.flops);
  // One new query against 256 cached keys, all of them read.
  const Operands decode{{{2, 32, 1, 128}, {2, 32, 256, 128}, {2, 32, 256, 128}},
                        {DType::kBFloat16, DType::kBFloat16, DType::kBFloat16}};
  EXPECT_EQ(forwardCost(gaudi2(), "scaled_dot_product_attention", decode.infos()).flops, 2 * 2.0 * 64 * 256 * 128);
}

TEST(OpCosts, ElementwiseOpsAreVectorPasses) {
  // add of two [1024, 1024] bf16 tensors: 3 x 2 MiB of HBM traffic.
  const Operands o{{{1024, 1024}, {1024, 1024}}, {DType::kBFloat16, DType::kBFloat16}};
  const OpCost c = forwardCost(gaudi2(), "add", o.infos());
  EXPECT_EQ(c.engine, Engine::kVector);
  EXPECT_EQ(c.flops, 0);
  EXPECT_EQ(c.seconds, gaudi2().vectorSeconds(3.0 * 1024 * 1024 * 2, 1024.0 * 1024, 1, DType::kBFloat16));
  // Backward reads the output's gradient and the input, writes one: 1.5x.
  EXPECT_EQ(backwardCost("add", c).seconds, 1.5 * c.seconds);
}

}  // namespace
}  // namespace hpu::core::estimate
