// Pricing of recorded ops (core/estimate/op_costs): which product each op's
// operand shapes describe, and the engine, FLOPs and seconds that follow
// from the Gaudi model's own formulas (tested in gaudi_model_test.cc).
#include "hpu/core/estimate/op_costs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace hpu::core::estimate {
namespace {

using device::DType;
using device::GaudiModel;
using device::OperandInfo;

// Operand infos over shapes that outlive them.
// Every operand requires a gradient unless `frozen` says otherwise.
struct Operands {
  std::vector<std::vector<std::int64_t>> shapes;
  std::vector<DType> dtypes;
  std::vector<bool> frozen = {};
  std::vector<OperandInfo> infos() const {
    std::vector<OperandInfo> out;
    for (std::size_t i = 0; i < shapes.size(); ++i)
      out.push_back({shapes[i], dtypes[i], !(i < frozen.size() && frozen[i])});
    return out;
  }
};

const GaudiModel& gaudi2() {
  static const GaudiModel m(device::Generation::kGaudi2, {}, device::Calibration{});
  return m;
}

TEST(OpCosts, LinearIsOneProductOverEveryLeadingDimension) {
  // x [2, 4096, 4096] by w [11008, 4096]: 8192 x 11008 x 4096.
  const Operands o{{{2, 4096, 4096}, {11008, 4096}}, {DType::kBFloat16, DType::kBFloat16}};
  const OpPrice p = priceOp(gaudi2(), "linear", o.infos());
  EXPECT_EQ(p.forward.engine, Engine::kMatrix);
  EXPECT_EQ(p.forward.flops, 2.0 * 8192 * 11008 * 4096);
  EXPECT_EQ(p.forward.seconds, gaudi2().matrixSeconds(1, 8192, 11008, 4096, DType::kBFloat16, DType::kBFloat16));
  // Conv1D's [in, out] weight is the same product.
  const Operands conv1d{{{2, 4096, 4096}, {4096, 11008}}, {DType::kBFloat16, DType::kBFloat16}};
  EXPECT_EQ(priceOp(gaudi2(), "linear", conv1d.infos()).forward.flops, p.forward.flops);
  // Backward: dX and dW, two products of the forward's size.
  EXPECT_EQ(p.backward.flops, 2 * p.forward.flops);
  EXPECT_EQ(p.backward.seconds, 2 * p.forward.seconds);
  // A frozen weight (LoRA's base) gets no dW; a model's input no dX.
  for (const std::vector<bool>& frozen : {std::vector<bool>{false, true}, std::vector<bool>{true, false}}) {
    const Operands one{o.shapes, o.dtypes, frozen};
    const OpPrice q = priceOp(gaudi2(), "linear", one.infos());
    EXPECT_EQ(q.backward.flops, p.forward.flops);
    EXPECT_EQ(q.backward.seconds, p.forward.seconds);
  }
}

TEST(OpCosts, Fp8ProductsRunAtTheFp8PeakAndWriteBf16) {
  const Operands o{{{8192, 4096}, {4096, 4096}}, {DType::kFloat8E4M3, DType::kFloat8E4M3}};
  EXPECT_EQ(priceOp(gaudi2(), "fp8_linear", o.infos()).forward.seconds,
            gaudi2().matrixSeconds(1, 8192, 4096, 4096, DType::kFloat8E4M3, DType::kBFloat16));
}

TEST(OpCosts, MatrixVectorProductsRunOnTheVectorEngine) {
  // 32 heads of one query row against 2048 keys of 128: on the matrix
  // engine 1/128 of a tile's rows, 4 tiles of 128 + 320 cycles a head; on
  // the TPCs, the 16 MiB of keys stream at HBM speed.
  const Operands o{{{32, 1, 128}, {32, 128, 2048}}, {DType::kBFloat16, DType::kBFloat16}};
  const OpCost c = priceOp(gaudi2(), "matmul", o.infos()).forward;
  EXPECT_EQ(c.engine, Engine::kVector);
  const double traffic = 32 * (128.0 + 128.0 * 2048 + 2048) * 2;
  EXPECT_EQ(c.seconds, gaudi2().vectorSeconds(traffic, 32 * 128.0 * 2048, 1, DType::kBFloat16));
  EXPECT_LT(c.seconds, gaudi2().matrixSeconds(32, 1, 2048, 128, DType::kBFloat16, DType::kBFloat16));
  // One row against a [4096, 4096] weight streams its 32 MiB either way: a
  // 128 x 512 tile (8 of them, 4 waves of 4096 + 320 cycles) keeps the
  // matrix engine under HBM's time, and a tie stays on the matrix engine.
  const Operands row{{{1, 4096}, {4096, 4096}}, {DType::kBFloat16, DType::kBFloat16}};
  const OpCost r = priceOp(gaudi2(), "linear", row.infos()).forward;
  EXPECT_EQ(r.engine, Engine::kMatrix);
  EXPECT_EQ(r.seconds, gaudi2().vectorSeconds((4096.0 + 4096.0 * 4096 + 4096) * 2, 0, 0, DType::kBFloat16));
}

TEST(OpCosts, ConvolutionsAreImplicitGemmsOverTheirOutputPixels) {
  // x [8, 64, 56, 56], w [128, 64, 3, 3], stride 2: y [8, 128, 28, 28], a
  // product of 8 x 28 x 28 pixels by 128 outputs over 64 x 9.
  const Operands o{{{8, 64, 56, 56}, {128, 64, 3, 3}, {128}, {8, 128, 28, 28}},
                   {DType::kBFloat16, DType::kBFloat16, DType::kBFloat16, DType::kBFloat16}};
  const OpCost c = priceOp(gaudi2(), "conv2d", o.infos()).forward;
  EXPECT_EQ(c.engine, Engine::kMatrix);
  EXPECT_EQ(c.flops, 2.0 * 8 * 28 * 28 * 128 * 64 * 9);
}

// Causal prefill at sequence 8192, 32 query heads sharing 8 key/value heads
// of 128: the 4 query heads of a key/value head are one product's rows, the
// masked half is skipped, the softmax's exponentials (10 instructions a
// score) run on the TPCs, and the fused kernel takes as long as its busiest
// engine.
TEST(OpCosts, AttentionIsAFusedKernelBoundByItsBusiestEngine) {
  const GaudiModel& m = gaudi2();
  const Operands o{{{1, 32, 8192, 128}, {1, 8, 8192, 128}, {1, 8, 8192, 128}},
                   {DType::kBFloat16, DType::kBFloat16, DType::kBFloat16}};
  const OpPrice p = priceOp(m, "scaled_dot_product_attention", o.infos());
  const double scores = 32.0 * 8192 * 8192 / 2;
  EXPECT_EQ(p.forward.flops, 4 * scores * 128);
  // The products' matrix-engine work alone (the scores never reach HBM),
  // at the attention kernel's efficiency.
  const auto mme = [&](std::int64_t rows, std::int64_t cols, std::int64_t inner) {
    return m.matrixWork(8, rows, cols, inner, DType::kBFloat16, DType::kBFloat16).mme;
  };
  const double products = (mme(4 * 8192, 8192, 128) + mme(4 * 8192, 128, 8192)) * 0.5 / m.calibration().attention;
  const double softmax = m.vectorSeconds(0, scores * 10, 1, DType::kBFloat16);
  const double hbm = m.vectorSeconds(4.0 * 32 * 8192 * 128 + 4.0 * 8 * 8192 * 128, 0, 0, DType::kBFloat16);
  EXPECT_EQ(p.forward.engine, Engine::kMatrix);
  EXPECT_DOUBLE_EQ(p.forward.seconds, std::max({products, softmax, hbm}));
  EXPECT_GT(softmax, 0.5 * products) << "the softmax is no small part of attention";
  // Backward: five products against two; the softmax recomputed and its
  // gradient, 12 instructions a score; twice the traffic.
  EXPECT_EQ(p.backward.flops, 2.5 * p.forward.flops);
  EXPECT_DOUBLE_EQ(p.backward.seconds,
                   std::max({2.5 * products, m.vectorSeconds(0, scores * 12, 1, DType::kBFloat16), 2 * hbm}));
}

// Decoding: one query row per head against a 2048-position fp8 cache, 8
// key/value heads for 32 query heads. The products run on the TPCs (4 rows
// would leave the MME's arrays nearly empty), in 8-bit lanes (256 a cycle),
// beside the softmax in bf16 (128), reading each key/value head once for its
// four query heads.
TEST(OpCosts, DecodingAttentionReadsEachKeyValueHeadOnce) {
  const GaudiModel& m = gaudi2();
  const Operands o{{{64, 32, 1, 128}, {64, 8, 2048, 128}, {64, 8, 2048, 128}},
                   {DType::kBFloat16, DType::kFloat8E4M3, DType::kFloat8E4M3}};
  const OpPrice p = priceOp(m, "scaled_dot_product_attention", o.infos());
  EXPECT_EQ(p.forward.engine, Engine::kVector);
  const double macs = 64.0 * 32 * 2048 * 128;  // per product
  const double qk = m.vectorSeconds(0, macs, 1, DType::kFloat8E4M3), pv = qk;
  EXPECT_DOUBLE_EQ(qk, m.vectorSeconds(0, macs, 1, DType::kBFloat16) / 2);
  const double softmax = m.vectorSeconds(0, 64.0 * 32 * 2048 * 10, 1, DType::kBFloat16);
  const double hbm = m.vectorSeconds(2 * (64.0 * 32 * 128 * 2) + 2 * (64.0 * 8 * 2048 * 128), 0, 0, DType::kBFloat16);
  EXPECT_DOUBLE_EQ(p.forward.seconds, std::max(qk + pv + softmax, hbm));
  EXPECT_EQ(p.forward.flops, 4 * macs);
}

// A kernel runs both of its products on one engine. Where Q K^T alone would
// run on one engine and P V alone on the other (few query rows: the two
// products' outputs fill the matrix engine's tiles differently), the kernel is priced whole on each engine, every
// product's work included, and takes the faster.
TEST(OpCosts, AttentionWithProductsOnDifferentEnginesIsPricedWholeOnEach) {
  const GaudiModel& m = gaudi2();
  const DType bf16 = DType::kBFloat16;
  const auto engineOf = [&](std::int64_t batch, std::int64_t rows, std::int64_t cols, std::int64_t inner) {
    const Operands o{{{batch, rows, inner}, {batch, inner, cols}}, {bf16, bf16}};
    return priceOp(m, "matmul", o.infos()).forward.engine;
  };
  // 4 query heads a key/value head, t positions each, against caches of s
  // positions: the first (t, s) that puts the two products apart.
  const std::int64_t b = 16, h = 32, hkv = 8, d = 128;
  std::int64_t t = 0, s = 0;
  for (std::int64_t rows = 1; rows <= 256 && s == 0; rows *= 2)
    for (std::int64_t len = 128; len <= 65536 && s == 0; len *= 2)
      if (engineOf(b * hkv, 4 * rows, len, d) != engineOf(b * hkv, 4 * rows, d, len)) {
        t = rows;
        s = len;
      }
  const Operands o{{{b, h, t, d}, {b, hkv, s, d}, {b, hkv, s, d}}, {bf16, bf16, bf16}};
  const OpCost c = priceOp(m, "scaled_dot_product_attention", o.infos()).forward;
  const double scores = static_cast<double>(b * h * t * s);
  const double softmax = m.vectorSeconds(0, scores * 10, 1, bf16);
  const double hbm = m.vectorSeconds(2.0 * (b * h * t * d) * 2 + 2.0 * (b * hkv * s * d) * 2, 0, 0, bf16);
  const double on_matrix =
      std::max({(m.matrixWork(b * hkv, 4 * t, s, d, bf16, bf16).mme + m.matrixWork(b * hkv, 4 * t, d, s, bf16, bf16).mme) /
                    m.calibration().attention,
                softmax, hbm});
  const double macs = scores * d;  // per product
  const double on_vector = std::max(2 * m.vectorSeconds(0, macs, 1, bf16) + softmax, hbm);
  EXPECT_DOUBLE_EQ(c.seconds, std::min(on_matrix, on_vector));
  EXPECT_EQ(c.engine, on_matrix <= on_vector ? Engine::kMatrix : Engine::kVector);
}

TEST(OpCosts, ElementwiseOpsAreVectorPasses) {
  // add of two [1024, 1024] bf16 tensors: 3 x 2 MiB of HBM traffic.
  const Operands o{{{1024, 1024}, {1024, 1024}}, {DType::kBFloat16, DType::kBFloat16}};
  const OpPrice p = priceOp(gaudi2(), "add", o.infos());
  EXPECT_EQ(p.forward.engine, Engine::kVector);
  EXPECT_EQ(p.forward.flops, 0);
  EXPECT_EQ(p.forward.seconds, gaudi2().vectorSeconds(3.0 * 1024 * 1024 * 2, 1024.0 * 1024, 1, DType::kBFloat16));
  // Backward reads the output's gradient and the input, writes one: 1.5x.
  EXPECT_DOUBLE_EQ(p.backward.seconds, 1.5 * p.forward.seconds);
}

TEST(OpCosts, EveryPricingConstantIsNamedWithItsSource) {
  for (const device::Assumption& a : opCostAssumptions()) {
    EXPECT_FALSE(a.source.empty()) << a.name;
    EXPECT_GT(a.value, 0) << a.name;
  }
}

}  // namespace
}  // namespace hpu::core::estimate
