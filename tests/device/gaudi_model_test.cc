// The Gaudi time model against its formulas, worked by hand from the
// published figures (spec.cc, gaudi_model.cc): the MME clock derived from the
// bf16 peak, output tiles plus the array's fill, the HBM roofline, TPC SIMD
// lanes, and collectives over 21 scale-up and 3 scale-out ports.
#include "hpu/device/gaudi_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>

namespace hpu::device {
namespace {

constexpr double kRel = 1e-12;

// Gaudi 2: 2 MMEs of 256 x 256 MACs at 432 TFLOP/s bf16: 432e12 / (2 x
// 256^2 x 2) = 1.648 GHz; HBM 2.46 TB/s at 90%.
const double kClock2 = 432e12 / (2.0 * 2 * 256 * 256);
const double kHbm2 = 2.46e12 * 0.9;

TEST(GaudiModel, LargeProductsRunTileByTileWithTheArraysFill) {
  const GaudiModel m(Generation::kGaudi2, {}, Calibration{});
  // 4096^3: 16 x 16 tiles on 2 engines, 128 waves of 4096 + 256 cycles:
  // 94% of the peak (4096 / 4352).
  const double s = m.matrixSeconds(1, 4096, 4096, 4096, DType::kBFloat16, DType::kBFloat16);
  EXPECT_NEAR(s, 128 * 4352 / kClock2, kRel * s);
  EXPECT_NEAR(2.0 * 4096 * 4096 * 4096 / s / 432e12, 4096.0 / 4352, 1e-9);
  // One row past a tile costs a whole row of tiles: 17 x 16 square tiles
  // (136 waves of 4352 cycles), or 33 x 8 tiles of 128 x 512 (132 waves of
  // 4096 + 320): the wide geometry finishes first.
  EXPECT_NEAR(m.matrixSeconds(1, 4097, 4096, 4096, DType::kBFloat16, DType::kBFloat16), 132 * 4416 / kClock2,
              kRel * s);
  // fp8 at its 865 TFLOP/s peak takes 432/865 of the bf16 time.
  EXPECT_NEAR(m.matrixSeconds(1, 4096, 4096, 4096, DType::kFloat8E4M3, DType::kBFloat16), s * 432 / 865, kRel * s);
  // fp32 has no published MME figure: a quarter of bf16's rate.
  EXPECT_NEAR(m.matrixSeconds(1, 4096, 4096, 4096, DType::kFloat32, DType::kFloat32), 4 * s, kRel * s);
  EXPECT_EQ(m.matrixSeconds(1, 0, 4096, 4096, DType::kBFloat16, DType::kBFloat16), 0);
}

TEST(GaudiModel, ThinProductsRunInTheGeometryThatFitsThem) {
  const GaudiModel m(Generation::kGaudi2, {}, Calibration{});
  const auto mme = [&](std::int64_t batch, std::int64_t rows, std::int64_t cols, std::int64_t inner) {
    return m.matrixWork(batch, rows, cols, inner, DType::kBFloat16, DType::kBFloat16).mme * kClock2;
  };
  // 78 decode rows by 8192 x 8192: 16 tiles of 128 x 512 (8 waves of
  // 8192 + 320 cycles), not 32 square tiles (16 waves of 8192 + 256).
  EXPECT_NEAR(mme(1, 78, 8192, 8192), 8 * 8512, 1e-6);
  // Attention's value product, 32 heads of [2048, 2048] x [2048, 128]: 4
  // tiles of 512 x 128 a head (64 waves of 2048 + 320), not 8 square ones.
  EXPECT_NEAR(mme(32, 2048, 128, 2048), 64 * 2368, 1e-6);
  // Square products keep the square array: its fill is the shortest.
  EXPECT_NEAR(mme(1, 4096, 4096, 4096), 128 * 4352, 1e-6);
  // Gaudi 1's engine has no published geometries: square only.
  const GaudiModel g1(Generation::kGaudi, {}, Calibration{});
  const double clock1 = g1.matrixPeakFlops(DType::kBFloat16) / (2.0 * 128 * 128);
  EXPECT_NEAR(g1.matrixWork(1, 78, 8192, 8192, DType::kBFloat16, DType::kBFloat16).mme * clock1, 64 * (8192 + 128),
              1e-6);
}

TEST(GaudiModel, ProductsThatReadMoreThanTheyComputeAreBoundByHbm) {
  const GaudiModel m(Generation::kGaudi2, {}, Calibration{});
  // [256, 2^20] by [2^20, 512]: one tile per engine, 2^20 + 256 cycles, but
  // 1.5 GiB of bf16 operands to stream: 0.69 ms of HBM against 0.64 ms.
  const double k = 1 << 20;
  const double bytes = (256 * k + k * 512 + 256 * 512) * 2;
  EXPECT_GT(bytes / kHbm2, (k + 256) / kClock2);
  EXPECT_NEAR(m.matrixSeconds(1, 256, 512, 1 << 20, DType::kBFloat16, DType::kBFloat16), bytes / kHbm2, 1e-12);
}

TEST(GaudiModel, VectorPassesAreBoundByHbmOrTpcLanes) {
  const GaudiModel m(Generation::kGaudi2, {}, Calibration{});
  // 24 TPCs of 256-byte SIMD: 128 bf16 lanes each per cycle.
  const double elements = 1e9, lanes = 128.0 * 24;
  EXPECT_NEAR(m.vectorSeconds(0, elements, 10, DType::kBFloat16), elements * 10 / (lanes * kClock2), 1e-12);
  EXPECT_NEAR(m.vectorSeconds(4e9, elements, 1, DType::kBFloat16), 4e9 / kHbm2, 1e-12);
  // fp32 has half the lanes.
  EXPECT_NEAR(m.vectorSeconds(0, elements, 10, DType::kFloat32), 2 * elements * 10 / (lanes * kClock2), 1e-12);
}

TEST(GaudiModel, CollectivesFollowTheServerAndScaleOutTopology) {
  // A port carries 100 Gbit/s x 4096/4178 of payload (RoCE v2 framing).
  const double port = 100e9 / 8 * 4096.0 / 4178;
  const double latency = 5e-6;
  const double bytes = 1 << 30;
  // One server of 8: 21 ports all-to-all, 3 to each peer; an all-reduce is a
  // reduce-scatter and an all-gather of bytes / 8 to each peer in parallel.
  const GaudiModel server(Generation::kGaudi2, {8, 1}, Calibration{});
  const double half = bytes / 8 / (3 * port) + latency;
  EXPECT_NEAR(server.collectiveSeconds(CollectiveKind::kAllreduce, bytes), 2 * half, 1e-12);
  EXPECT_NEAR(server.collectiveSeconds(CollectiveKind::kReduceScatter, bytes), half, 1e-12);
  EXPECT_NEAR(server.collectiveSeconds(CollectiveKind::kAllgather, bytes), half, 1e-12);
  // 4 servers: a ring among the cards of each local rank over 3 scale-out
  // ports, on each card's bytes / 8.
  const GaudiModel four(Generation::kGaudi2, {8, 4}, Calibration{});
  const double ring = 3.0 / 4 * (bytes / 8) / (3 * port) + 3 * latency;
  EXPECT_NEAR(four.collectiveSeconds(CollectiveKind::kAllreduce, bytes), 2 * half + 2 * ring, 1e-12);
  EXPECT_EQ(GaudiModel(Generation::kGaudi2, {1, 1}).collectiveSeconds(CollectiveKind::kAllreduce, bytes), 0);
  // Gaudi 3's ports are twice as fast.
  const GaudiModel g3(Generation::kGaudi3, {8, 1}, Calibration{});
  EXPECT_NEAR(g3.collectiveSeconds(CollectiveKind::kAllreduce, bytes), 2 * (bytes / 8 / (6 * port) + latency), 1e-12);
}

// The overhead beyond transfers is paid per peer a rank synchronises with:
// the group's other cards in its server, and one ring neighbour across two
// servers (two across more): 1 in a 2-card group, 7 in a server of 8, 9 in a
// group of 8 x 4 (transfers as above).
TEST(GaudiModel, ACollectivesOverheadIsPaidPerPeer) {
  Calibration c;
  c.collective_overhead = 10e-6;
  const double bytes = 1 << 20;
  const GaudiModel none(Generation::kGaudi2, {8, 4}, Calibration{}), with(Generation::kGaudi2, {8, 4}, c);
  const auto overhead = [&](int size, int nodes) {
    return with.collectiveSeconds(CollectiveKind::kAllreduce, bytes, size, nodes) -
           none.collectiveSeconds(CollectiveKind::kAllreduce, bytes, size, nodes);
  };
  EXPECT_EQ(with.collectivePeers(2, 1), 1);
  EXPECT_EQ(with.collectivePeers(8, 1), 7);
  EXPECT_EQ(with.collectivePeers(16, 2), 8);
  EXPECT_EQ(with.collectivePeers(), 9) << "the job: 8 x 4";
  EXPECT_EQ(with.collectivePeers(1, 1), 0);
  EXPECT_NEAR(overhead(2, 1), 10e-6, 1e-12);
  EXPECT_NEAR(overhead(8, 1), 70e-6, 1e-12);
  EXPECT_NEAR(overhead(32, 4), 90e-6, 1e-12);
  EXPECT_EQ(with.collectiveSeconds(CollectiveKind::kAllreduce, bytes, 1, 1), 0);
}

TEST(GaudiModel, EveryAssumptionIsNamedWithItsSource) {
  const GaudiModel m(Generation::kGaudi3, {8, 2});
  const auto all = m.assumptions();
  ASSERT_FALSE(all.empty());
  for (const Assumption& a : all) {
    EXPECT_FALSE(a.name.empty());
    EXPECT_FALSE(a.unit.empty()) << a.name;
    EXPECT_FALSE(a.source.empty()) << a.name;
    EXPECT_TRUE(std::isfinite(a.value)) << a.name;
  }
  // Gaudi 3: 8 MMEs; clock 1835e12 / (8 x 256^2 x 2) = 1.75 GHz.
  const auto clock = std::find_if(all.begin(), all.end(), [](const Assumption& a) { return a.name == "mme_clock"; });
  ASSERT_NE(clock, all.end());
  EXPECT_NEAR(clock->value, 1835e12 / (8.0 * 256 * 256 * 2) / 1e9, 1e-12);
}


// The calibrated efficiencies (bench/estimate/calibrate.py) stay physical:
// no resource above its peak, HBM at least half of it, a collective's
// overhead under 100 us, the host under 20 ms a graph; and every published
// run they were validated on keeps its leave-one-out ratio.
TEST(GaudiCalibration, FittedEfficienciesArePhysicalAndValidated) {
  for (const Generation g : {Generation::kGaudi2, Generation::kGaudi3}) {
    SCOPED_TRACE(std::string(generationName(g)));
    const Calibration c = calibrationFor(g);
    for (const double e : {c.mme, c.attention, c.tpc, c.collective}) {
      EXPECT_GT(e, 0.0);
      EXPECT_LE(e, 1.0);
    }
    EXPECT_GE(c.hbm, 0.5);
    EXPECT_LE(c.hbm, 1.0);
    EXPECT_GE(c.collective_overhead, 0.0);
    EXPECT_LE(c.collective_overhead, 1e-4);
    EXPECT_GE(c.host_per_graph, 0.0);
    EXPECT_LE(c.host_per_graph, 0.02);
    EXPECT_GE(validationRows(g).size(), 20u);
    for (const ValidationRow& r : validationRows(g)) {
      EXPECT_GT(r.loo_ratio, 0.5);
      EXPECT_LT(r.loo_ratio, 2.0);
    }
  }
  EXPECT_TRUE(validationRows(Generation::kGaudi).empty());
}

// The likely range of an estimate: the leave-one-out ratios of the most
// similar published runs of the same mode, widened with the distance from
// the nearest.
TEST(GaudiCalibration, TheLikelyRangeComesFromTheMostSimilarPublishedRuns) {
  const std::span<const ValidationRow> rows = validationRows(Generation::kGaudi3);
  const ValidationRow published = rows[1];  // Llama 2 7B, 128 in / 2048 out, batch 217 (a copy: not left out)
  const Uncertainty self = uncertaintyFor(Generation::kGaudi3, published, 1);
  EXPECT_EQ(self.rows, 1);
  EXPECT_EQ(self.rows_low, published.loo_ratio);
  EXPECT_EQ(self.rows_high, published.loo_ratio);
  EXPECT_DOUBLE_EQ(self.widening, std::exp(kUncertaintyBase));  // distance 0
  EXPECT_DOUBLE_EQ(self.low, published.loo_ratio / self.widening);
  const Uncertainty four = uncertaintyFor(Generation::kGaudi3, published);
  EXPECT_EQ(four.rows, 4);
  EXPECT_LE(four.low, published.loo_ratio);
  EXPECT_GE(four.high, published.loo_ratio);
  // Farther from every row, wider.
  ValidationRow far = published;
  far.cards = 64;
  const Uncertainty wider = uncertaintyFor(Generation::kGaudi3, far);
  EXPECT_DOUBLE_EQ(wider.widening, std::exp(kUncertaintyBase + kUncertaintyPerDistance *
                                                                    validationDistance(far, wider.nearest)));
  EXPECT_GT(wider.widening, four.widening);
  // Gaudi 3 has no published training run: Gaudi 2's, widened for the other generation.
  ValidationRow training{ValidationRow::Mode::kTraining, 4096, 0, 1024, 8, 0};
  const Uncertainty borrowed = uncertaintyFor(Generation::kGaudi3, training);
  EXPECT_EQ(borrowed.rows, 4);
  EXPECT_EQ(borrowed.from, Generation::kGaudi2);
  EXPECT_DOUBLE_EQ(borrowed.widening, std::exp(kUncertaintyBase + kUncertaintyOtherGeneration));  // Llama 2 7B's row
  EXPECT_EQ(uncertaintyFor(Generation::kGaudi, training).rows, 0);
}

// The rule holds on rows it did not see: at least 90% of the published runs
// fall inside the range the other runs give them, of their own generation
// and of the other one (the Gaudi 3 training case).
TEST(GaudiCalibration, AtLeastNinetyPercentOfHeldOutRunsFallInsideTheirRange) {
  for (const bool other : {false, true}) {
    int inside = 0, unwidened = 0, total = 0;
    for (const Generation g : {Generation::kGaudi2, Generation::kGaudi3}) {
      const Generation rows_of = other ? (g == Generation::kGaudi2 ? Generation::kGaudi3 : Generation::kGaudi2) : g;
      for (const ValidationRow& r : validationRows(g)) {
        const Uncertainty u = uncertaintyWithout(g, r, rows_of);
        if (u.rows == 0) continue;
        ++total;
        inside += u.low <= r.loo_ratio && r.loo_ratio <= u.high;
        unwidened += u.rows_low <= r.loo_ratio && r.loo_ratio <= u.rows_high;
      }
    }
    SCOPED_TRACE(other ? "the other generation's runs" : "the same generation's runs");
    EXPECT_EQ(total, other ? 40 : 51);
    EXPECT_GE(inside, 0.9 * total) << inside << " of " << total;
    // The runs' own ratios alone, as the range was before the widening, hold far fewer.
    EXPECT_LT(unwidened, 0.8 * total) << unwidened << " of " << total;
  }
}

}  // namespace
}  // namespace hpu::device
