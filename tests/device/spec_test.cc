#include "hpu/device/spec.h"

#include <gtest/gtest.h>

#include "hpu/device/errors.h"

namespace hpu::device {
namespace {

TEST(Spec, HbmCapacityPerGeneration) {
  EXPECT_EQ(specFor(Generation::kGaudi).hbmBytes, 32ull << 30);
  EXPECT_EQ(specFor(Generation::kGaudi2).hbmBytes, 96ull << 30);
  EXPECT_EQ(specFor(Generation::kGaudi3).hbmBytes, 128ull << 30);
  EXPECT_DOUBLE_EQ(specFor(Generation::kGaudi2).hbmTerabytesPerSecond, 2.46);
  EXPECT_EQ(specFor(Generation::kGaudi3).nicPorts, 24);
  EXPECT_EQ(specFor(Generation::kGaudi3).nicGbitPerPort, 200);
  EXPECT_EQ(specFor(Generation::kGaudi).nicPorts, 10);
}

TEST(Spec, Fp8AndFloat16OnlyFromGaudi2AndFloat64Nowhere) {
  for (DType t : {DType::kFloat8E4M3, DType::kFloat8E5M2, DType::kFloat16}) {
    EXPECT_FALSE(supports(specFor(Generation::kGaudi), t)) << dtypeName(t);
    EXPECT_TRUE(supports(specFor(Generation::kGaudi2), t)) << dtypeName(t);
    EXPECT_TRUE(supports(specFor(Generation::kGaudi3), t)) << dtypeName(t);
  }
  for (Generation g : {Generation::kGaudi, Generation::kGaudi2, Generation::kGaudi3}) {
    EXPECT_FALSE(supports(specFor(g), DType::kFloat64));
    for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kInt64, DType::kInt32, DType::kUInt8, DType::kBool})
      EXPECT_TRUE(supports(specFor(g), t)) << dtypeName(t);
  }
}

TEST(Spec, MatrixEnginePeaksArePublishedFiguresOnly) {
  EXPECT_EQ(peakTflops(specFor(Generation::kGaudi), DType::kBFloat16), 60.0);
  EXPECT_EQ(peakTflops(specFor(Generation::kGaudi2), DType::kBFloat16), 432.0);
  EXPECT_EQ(peakTflops(specFor(Generation::kGaudi2), DType::kFloat8E4M3), 865.0);
  EXPECT_EQ(peakTflops(specFor(Generation::kGaudi3), DType::kBFloat16), 1835.0);
  EXPECT_EQ(peakTflops(specFor(Generation::kGaudi3), DType::kFloat8E5M2), 1835.0);
  EXPECT_FALSE(peakTflops(specFor(Generation::kGaudi), DType::kFloat8E4M3).has_value());
  EXPECT_FALSE(peakTflops(specFor(Generation::kGaudi2), DType::kFloat32).has_value());
}

TEST(Spec, NamesParseBothWays) {
  for (Generation g : {Generation::kGaudi, Generation::kGaudi2, Generation::kGaudi3})
    EXPECT_EQ(parseGeneration(generationName(g)), g);
  EXPECT_EQ(generationName(Generation::kGaudi2), "gaudi2");
  EXPECT_EQ(parseGeneration("Gaudi3"), Generation::kGaudi3);
  EXPECT_EQ(parseGeneration("gaudi1"), Generation::kGaudi);
  EXPECT_FALSE(parseGeneration("gaudi4").has_value());
  EXPECT_FALSE(parseGeneration("").has_value());
}

TEST(Spec, UnsupportedDTypesAreRefusedWithWhatToDo) {
  const auto messageOf = [](Generation g, DType t) -> std::string {
    try {
      requireSupported(specFor(g), t, "hpu:0");
    } catch (const UnsupportedDTypeError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(messageOf(Generation::kGaudi, DType::kFloat8E4M3),
            "hpu:0: FP8 not supported on Gaudi, Gaudi2 or higher required (float8_e4m3fn asked on gaudi; set "
            "HPU_EMULATOR_GENERATION=gaudi2 or gaudi3)");
  EXPECT_EQ(messageOf(Generation::kGaudi3, DType::kFloat64),
            "hpu:0: float64 is not supported on HPU (gaudi3); use float32");
  EXPECT_EQ(messageOf(Generation::kGaudi, DType::kFloat16),
            "hpu:0: float16 not supported on Gaudi, Gaudi2 or higher required; use bfloat16 "
            "(trainer.precision=bf16-mixed) or set HPU_EMULATOR_GENERATION=gaudi2");
  EXPECT_EQ(messageOf(Generation::kGaudi2, DType::kFloat8E5M2), "no error");
}

}  // namespace
}  // namespace hpu::device
