#include "hpu/device/numerics.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace hpu::device {
namespace {

std::uint32_t bitsOf(float x) { return std::bit_cast<std::uint32_t>(x); }
float fromBits(std::uint32_t b) { return std::bit_cast<float>(b); }

// ---- bfloat16 / float16 against PyTorch (tests/device/gen_float_fixture.py) ----

struct Case {
  std::uint32_t input;
  std::uint16_t bf16;
  std::uint16_t fp16;
};

std::vector<Case> loadFixture() {
  const std::string path = std::string(HPU_SOURCE_DIR) + "/tests/device/fixtures/float_conversions.txt";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::vector<Case> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::uint32_t x = 0, b = 0, h = 0;
    fields >> std::hex >> x >> b >> h;
    EXPECT_FALSE(fields.fail()) << "bad fixture line: " << line;
    cases.push_back({x, static_cast<std::uint16_t>(b), static_cast<std::uint16_t>(h)});
  }
  return cases;
}

TEST(Numerics, FixtureCoversTheEdgeCases) {
  const auto cases = loadFixture();
  ASSERT_GT(cases.size(), 9000u);
  int nans = 0, infs = 0, denormals = 0, halfSubnormals = 0;
  for (const Case& c : cases) {
    const float x = fromBits(c.input);
    nans += std::isnan(x);
    infs += std::isinf(x);
    denormals += std::fpclassify(x) == FP_SUBNORMAL;
    halfSubnormals += (c.fp16 & 0x7C00) == 0 && (c.fp16 & 0x3FF) != 0;
  }
  EXPECT_GT(nans, 10);
  EXPECT_GE(infs, 2);
  EXPECT_GT(denormals, 5);
  EXPECT_GT(halfSubnormals, 50);
}

TEST(Numerics, BFloat16MatchesPyTorchBitForBit) {
  for (const Case& c : loadFixture()) {
    ASSERT_EQ(toBFloat16Bits(fromBits(c.input)), c.bf16) << std::hex << "input 0x" << c.input;
    ASSERT_EQ(bitsOf(roundTo(fromBits(c.input), DType::kBFloat16)), static_cast<std::uint32_t>(c.bf16) << 16)
        << std::hex << "input 0x" << c.input;
  }
}

TEST(Numerics, Float16MatchesPyTorchBitForBit) {
  for (const Case& c : loadFixture()) {
    ASSERT_EQ(toFloat16Bits(fromBits(c.input)), c.fp16) << std::hex << "input 0x" << c.input;
    ASSERT_EQ(bitsOf(roundTo(fromBits(c.input), DType::kFloat16)), bitsOf(fromFloat16Bits(c.fp16)))
        << std::hex << "input 0x" << c.input;
  }
}

TEST(Numerics, RoundInPlaceMatchesPyTorchOnTheWholeFixture) {
  const auto cases = loadFixture();
  std::vector<float> bf16(cases.size()), fp16(cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) bf16[i] = fp16[i] = fromBits(cases[i].input);
  roundInPlace(bf16, DType::kBFloat16);
  roundInPlace(fp16, DType::kFloat16);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    ASSERT_EQ(bitsOf(bf16[i]), static_cast<std::uint32_t>(cases[i].bf16) << 16) << i;
    ASSERT_EQ(bitsOf(fp16[i]), bitsOf(fromFloat16Bits(cases[i].fp16))) << i;
  }
}

TEST(Numerics, Float16DecodesEveryCodeAndRoundTrips) {
  EXPECT_EQ(fromFloat16Bits(0x3C00), 1.0f);
  EXPECT_EQ(fromFloat16Bits(0x7BFF), 65504.0f);
  EXPECT_EQ(fromFloat16Bits(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(fromFloat16Bits(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(fromFloat16Bits(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(fromFloat16Bits(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(bitsOf(fromFloat16Bits(0x8000)), 0x80000000u);
  EXPECT_TRUE(std::isnan(fromFloat16Bits(0x7C01)));
  for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
    if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0) continue;  // NaN payloads are not kept
    ASSERT_EQ(toFloat16Bits(fromFloat16Bits(static_cast<std::uint16_t>(h))), h) << std::hex << h;
  }
}

// The project's one bfloat16 rule (hpu/numerics/bfloat16.h), which the
// collectives' reduction kernels round by too (tests/comm: the same bits).
TEST(Numerics, BFloat16RoundsTiesToEvenOverflowToInfAndEveryNaNTo0xFFFF) {
  const std::pair<std::uint32_t, std::uint16_t> cases[] = {
      {0x3F808000u, 0x3F80},  // 1 + 2^-8: a tie, to 1.0 (even)
      {0x3F818000u, 0x3F82},  // 1.0078125 + 2^-8: a tie, to 1.015625 (even)
      {0x7F7FFFFFu, 0x7F80},  // the largest float: +Inf
      {0xFF7FFFFFu, 0xFF80},
      {0x7F800000u, 0x7F80},
      {0x7FC10000u, 0xFFFF},  // a NaN with a payload
      {0xFFC00000u, 0xFFFF},  // a negative NaN
      {0x7F800001u, 0xFFFF},  // a signalling NaN
  };
  for (const auto& [input, bits] : cases) {
    EXPECT_EQ(toBFloat16Bits(fromBits(input)), bits) << std::hex << "input 0x" << input;
    std::vector<float> v{fromBits(input)};
    roundInPlace(v, DType::kBFloat16);
    EXPECT_EQ(bitsOf(v[0]), static_cast<std::uint32_t>(bits) << 16) << std::hex << "input 0x" << input;
  }
}

TEST(Numerics, BFloat16DecodeIsTheHighHalfOfAFloat) {
  EXPECT_EQ(fromBFloat16Bits(0x3F80), 1.0f);
  EXPECT_EQ(bitsOf(fromBFloat16Bits(0x0001)), 0x00010000u);  // a float denormal
  EXPECT_EQ(fromBFloat16Bits(0xFF80), -std::numeric_limits<float>::infinity());
}

// ---- fp8 against the OCP OFP8 spec (rev 1.0, tables of E4M3 and E5M2) ----

TEST(Numerics, Fp8E4M3SpecialValuesOfTheOcpTable) {
  constexpr DType t = DType::kFloat8E4M3;
  EXPECT_EQ(fromFp8Bits(0x7E, t), 448.0f);                     // max normal S.1111.110
  EXPECT_EQ(fromFp8Bits(0xFE, t), -448.0f);
  EXPECT_EQ(fromFp8Bits(0x08, t), std::ldexp(1.0f, -6));       // min normal S.0001.000
  EXPECT_EQ(fromFp8Bits(0x07, t), 0.875f * std::ldexp(1.0f, -6));  // max subnormal S.0000.111
  EXPECT_EQ(fromFp8Bits(0x01, t), std::ldexp(1.0f, -9));       // min subnormal S.0000.001
  EXPECT_EQ(bitsOf(fromFp8Bits(0x00, t)), 0x00000000u);        // +0
  EXPECT_EQ(bitsOf(fromFp8Bits(0x80, t)), 0x80000000u);        // -0
  EXPECT_TRUE(std::isnan(fromFp8Bits(0x7F, t)));               // NaN S.1111.111
  EXPECT_TRUE(std::isnan(fromFp8Bits(0xFF, t)));
  EXPECT_EQ(fromFp8Bits(0x78, t), 256.0f);                     // S.1111.000 is a normal number: no Inf
  EXPECT_EQ(fromFp8Bits(0x38, t), 1.0f);                       // bias 7
  EXPECT_EQ(kFp8E4M3Max, 448.0f);
  EXPECT_EQ(fp8Max(t), 448.0f);

  EXPECT_EQ(toFp8Bits(448.0f, t), 0x7E);
  EXPECT_EQ(toFp8Bits(-std::ldexp(1.0f, -6), t), 0x88);
  EXPECT_EQ(toFp8Bits(std::ldexp(1.0f, -9), t), 0x01);
  EXPECT_EQ(toFp8Bits(1.0f, t), 0x38);
  EXPECT_EQ(toFp8Bits(-0.0f, t), 0x80);
  EXPECT_EQ(toFp8Bits(std::nanf(""), t), 0x7F);
  EXPECT_EQ(toFp8Bits(-std::nanf(""), t), 0xFF);
}

TEST(Numerics, Fp8E4M3RoundsToNearestEvenAndSaturates) {
  constexpr DType t = DType::kFloat8E4M3;
  EXPECT_EQ(toFp8Bits(1.0625f, t), 0x38);  // tie between 1.0 and 1.125: even mantissa 000
  EXPECT_EQ(toFp8Bits(1.1875f, t), 0x3A);  // tie between 1.125 and 1.25: even mantissa 010
  EXPECT_EQ(toFp8Bits(std::ldexp(1.0f, -10), t), 0x00);        // tie between 0 and min subnormal
  EXPECT_EQ(toFp8Bits(std::ldexp(1.5f, -10), t), 0x01);
  EXPECT_EQ(toFp8Bits(std::ldexp(3.0f, -10), t), 0x02);        // subnormal tie to even
  EXPECT_EQ(toFp8Bits(std::ldexp(15.0f, -10), t), 0x08);       // rounds up into the min normal

  constexpr float kInf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(toFp8Bits(464.0f, t, Fp8Overflow::kNonFinite), 0x7E);  // tie: 448 is even
  EXPECT_EQ(toFp8Bits(465.0f, t, Fp8Overflow::kNonFinite), 0x7F);  // past max: NaN, no Inf
  EXPECT_EQ(toFp8Bits(-1e9f, t, Fp8Overflow::kNonFinite), 0xFF);
  EXPECT_EQ(toFp8Bits(kInf, t, Fp8Overflow::kNonFinite), 0x7F);
  EXPECT_EQ(toFp8Bits(465.0f, t, Fp8Overflow::kSaturate), 0x7E);
  EXPECT_EQ(toFp8Bits(-1e9f, t, Fp8Overflow::kSaturate), 0xFE);
  EXPECT_EQ(toFp8Bits(kInf, t, Fp8Overflow::kSaturate), 0x7E);
  EXPECT_EQ(toFp8Bits(-kInf, t, Fp8Overflow::kSaturate), 0xFE);
  EXPECT_EQ(toFp8Bits(std::nanf(""), t, Fp8Overflow::kSaturate), 0x7F);  // NaN stays NaN
}

TEST(Numerics, Fp8E5M2SpecialValuesOfTheOcpTable) {
  constexpr DType t = DType::kFloat8E5M2;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(fromFp8Bits(0x7B, t), 57344.0f);                     // max normal S.11110.11
  EXPECT_EQ(fromFp8Bits(0x04, t), std::ldexp(1.0f, -14));        // min normal S.00001.00
  EXPECT_EQ(fromFp8Bits(0x03, t), 0.75f * std::ldexp(1.0f, -14));  // max subnormal S.00000.11
  EXPECT_EQ(fromFp8Bits(0x01, t), std::ldexp(1.0f, -16));        // min subnormal S.00000.01
  EXPECT_EQ(fromFp8Bits(0x7C, t), kInf);                         // Inf S.11111.00
  EXPECT_EQ(fromFp8Bits(0xFC, t), -kInf);
  for (std::uint8_t nan : {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF})  // NaN S.11111.{01,10,11}
    EXPECT_TRUE(std::isnan(fromFp8Bits(nan, t))) << int(nan);
  EXPECT_EQ(fromFp8Bits(0x3C, t), 1.0f);  // bias 15
  EXPECT_EQ(kFp8E5M2Max, 57344.0f);

  EXPECT_EQ(toFp8Bits(57344.0f, t), 0x7B);
  EXPECT_EQ(toFp8Bits(std::ldexp(1.0f, -16), t), 0x01);
  EXPECT_EQ(toFp8Bits(std::nanf(""), t), 0x7E);
  EXPECT_EQ(toFp8Bits(-std::nanf(""), t), 0xFE);
  EXPECT_EQ(toFp8Bits(1.125f, t), 0x3C);  // tie between 1.0 and 1.25: even
  EXPECT_EQ(toFp8Bits(1.375f, t), 0x3E);  // tie between 1.25 and 1.5: even

  EXPECT_EQ(toFp8Bits(60000.0f, t, Fp8Overflow::kNonFinite), 0x7B);  // below the overflow tie
  EXPECT_EQ(toFp8Bits(61440.0f, t, Fp8Overflow::kNonFinite), 0x7C);  // tie rounds to 2^16: Inf
  EXPECT_EQ(toFp8Bits(-1e9f, t, Fp8Overflow::kNonFinite), 0xFC);
  EXPECT_EQ(toFp8Bits(kInf, t, Fp8Overflow::kNonFinite), 0x7C);
  EXPECT_EQ(toFp8Bits(61440.0f, t, Fp8Overflow::kSaturate), 0x7B);
  EXPECT_EQ(toFp8Bits(-1e9f, t, Fp8Overflow::kSaturate), 0xFB);
  EXPECT_EQ(toFp8Bits(kInf, t, Fp8Overflow::kSaturate), 0x7B);
}

TEST(Numerics, Fp8EveryFiniteCodeRoundTrips) {
  for (DType t : {DType::kFloat8E4M3, DType::kFloat8E5M2}) {
    int finite = 0;
    for (int code = 0; code < 256; ++code) {
      const float v = fromFp8Bits(static_cast<std::uint8_t>(code), t);
      if (!std::isfinite(v)) continue;
      ++finite;
      ASSERT_EQ(toFp8Bits(v, t, Fp8Overflow::kNonFinite), code) << dtypeName(t) << " " << code;
      ASSERT_EQ(bitsOf(roundTo(v, t)), bitsOf(v));
    }
    EXPECT_EQ(finite, t == DType::kFloat8E4M3 ? 254 : 248);
  }
}

// roundTo(x) == decode(encode(x)) across the float32 bit space (a strided sweep).
TEST(Numerics, RoundToAgreesWithEncodeDecodeEverywhere) {
  constexpr std::uint64_t kStride = 4099;
  for (std::uint64_t b = 0; b <= 0xFFFFFFFFull; b += kStride) {
    const float x = fromBits(static_cast<std::uint32_t>(b));
    ASSERT_EQ(bitsOf(roundTo(x, DType::kBFloat16)), bitsOf(fromBFloat16Bits(toBFloat16Bits(x)))) << b;
    ASSERT_EQ(bitsOf(roundTo(x, DType::kFloat16)), bitsOf(fromFloat16Bits(toFloat16Bits(x)))) << b;
    for (DType t : {DType::kFloat8E4M3, DType::kFloat8E5M2})
      ASSERT_EQ(bitsOf(roundTo(x, t)), bitsOf(fromFp8Bits(toFp8Bits(x, t), t))) << b;
  }
}

TEST(Numerics, RoundInPlaceEqualsScalarRoundingForEveryDType) {
  std::mt19937 rng(7);
  std::vector<float> data(4097);
  for (float& x : data) x = fromBits(static_cast<std::uint32_t>(rng()));
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kFloat8E4M3, DType::kFloat8E5M2}) {
    std::vector<float> rounded = data;
    roundInPlace(rounded, t);
    for (std::size_t i = 0; i < data.size(); ++i)
      ASSERT_EQ(bitsOf(rounded[i]), bitsOf(roundTo(data[i], t))) << dtypeName(t) << " " << i;
  }
  roundInPlace(std::span<float>(), DType::kBFloat16);  // empty is fine
}

TEST(Numerics, RoundingNonFloatingDTypesIsABug) {
  EXPECT_DEATH(roundTo(1.0f, DType::kInt32), "not a device floating dtype");
  std::vector<float> data(3);
  EXPECT_DEATH(roundInPlace(data, DType::kFloat64), "float64 is not a device floating dtype");
  EXPECT_DEATH(fp8Max(DType::kBFloat16), "bfloat16 is not an fp8 dtype");
}

// ---- per-tensor scaling (Transformer Engine DelayedScaling) ----

TEST(Numerics, Fp8ScaleFollowsDelayedScaling) {
  EXPECT_EQ(fp8ScaleFromAmax(2.0f, 1.0f, DType::kFloat8E4M3), 224.0f);
  EXPECT_EQ(fp8ScaleFromAmax(2.0f, 1.0f, DType::kFloat8E4M3, 1), 112.0f);
  EXPECT_EQ(fp8ScaleFromAmax(4.0f, 1.0f, DType::kFloat8E5M2, 2), 57344.0f / 4.0f / 4.0f);
  // Previous scale kept when amax gives no usable scale.
  EXPECT_EQ(fp8ScaleFromAmax(0.0f, 3.0f, DType::kFloat8E4M3), 3.0f);
  EXPECT_EQ(fp8ScaleFromAmax(std::nanf(""), 3.0f, DType::kFloat8E4M3), 3.0f);
  EXPECT_EQ(fp8ScaleFromAmax(std::numeric_limits<float>::infinity(), 3.0f, DType::kFloat8E4M3), 3.0f);
  EXPECT_EQ(fp8ScaleFromAmax(1e-45f, 3.0f, DType::kFloat8E4M3), 3.0f);  // 448 / 1e-45 overflows
}

TEST(Numerics, AbsMaxPropagatesNaN) {
  EXPECT_EQ(absMax(std::vector<float>{-3.0f, 2.0f, 1.0f}), 3.0f);
  EXPECT_EQ(absMax(std::vector<float>{}), 0.0f);
  EXPECT_EQ(absMax(std::vector<float>{1.0f, -std::numeric_limits<float>::infinity()}),
            std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(absMax(std::vector<float>{1.0f, std::nanf(""), 5.0f})));
}

TEST(Numerics, QuantizeScalesRoundsAndSaturatesThenDequantizeUnscales) {
  std::vector<float> data{1.0f, 3.0f, -500.0f, 0.3f};
  quantizeFp8InPlace(data, DType::kFloat8E4M3, 2.0f);
  EXPECT_EQ(data, (std::vector<float>{2.0f, 6.0f, -448.0f, 0.625f}));  // 0.6 -> 0.625 (E4M3 grid)
  dequantizeFp8InPlace(data, 2.0f);
  EXPECT_EQ(data, (std::vector<float>{1.0f, 3.0f, -224.0f, 0.3125f}));

  std::vector<float> wide{1e6f, -7.0f};
  quantizeFp8InPlace(wide, DType::kFloat8E5M2, 1.0f);
  EXPECT_EQ(wide, (std::vector<float>{57344.0f, -7.0f}));
}

}  // namespace
}  // namespace hpu::device
