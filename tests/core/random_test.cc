// The deterministic RNG: the xoshiro256** reference sequence, seeding and
// streams, state round trips, and the distributions of below(), uniform(),
// normal() and randomPermutation(). Statistical checks run on fixed seeds, so
// they are deterministic; their bounds are loose (p < 1e-4 for a fair
// generator) and exist to catch a broken mapping, not to certify quality.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "hpu/core/base/random.h"

namespace hpu::core {
namespace {

std::vector<std::uint64_t> draws(Generator g, int n) {
  std::vector<std::uint64_t> out;
  for (int i = 0; i < n; ++i) out.push_back(g.next());
  return out;
}

// Pearson's chi-square statistic of observed counts against a uniform expectation.
double chiSquare(const std::vector<int>& counts) {
  const double expected = std::accumulate(counts.begin(), counts.end(), 0.0) / static_cast<double>(counts.size());
  double chi = 0;
  for (int c : counts) chi += (c - expected) * (c - expected) / expected;
  return chi;
}

TEST(Generator, MatchesTheXoshiro256StarStarReferenceSequence) {
  // Reference outputs of xoshiro256** from state {1, 2, 3, 4} (as in the
  // published test vectors, e.g. rand_xoshiro's).
  Generator g(0);
  g.setState({{1, 2, 3, 4}});
  EXPECT_EQ(draws(g, 10), (std::vector<std::uint64_t>{11520ull, 0ull, 1509978240ull, 1215971899390074240ull,
                                                       1216172134540287360ull, 607988272756665600ull,
                                                       16172922978634559625ull, 8476171486693032832ull,
                                                       10595114339597558777ull, 2904607092377533576ull}));
}

TEST(Generator, SameSeedAndStreamSameNumbersOtherwiseDifferent) {
  EXPECT_EQ(draws(Generator(7), 100), draws(Generator(7), 100));
  EXPECT_EQ(draws(Generator(7, 3), 100), draws(Generator(7, 3), 100));
  EXPECT_NE(draws(Generator(7), 100), draws(Generator(8), 100));
  EXPECT_NE(draws(Generator(7, 1), 100), draws(Generator(7, 2), 100));
  EXPECT_NE(draws(Generator(0), 4), (std::vector<std::uint64_t>(4, 0))) << "seed 0 is a valid seed";
  // Named streams are ids (stream << 48) ^ sub.
  EXPECT_EQ(draws(Generator(7, RandomStream::kShuffle, 5), 10), draws(Generator(7, (std::uint64_t{2} << 48) ^ 5), 10));
  EXPECT_NE(draws(Generator(7, RandomStream::kShuffle, 0), 10), draws(Generator(7, RandomStream::kDropout, 0), 10));
}

TEST(Generator, StateRoundTripResumesTheSequence) {
  Generator g(99);
  for (int i = 0; i < 37; ++i) g.next();
  const Generator::State s = g.state();
  const auto expected = draws(g, 20);
  Generator other(1);
  other.setState(s);
  EXPECT_EQ(draws(other, 20), expected);
}

TEST(Generator, BelowStaysInRangeForAnyBound) {
  Generator g(3);
  for (std::uint64_t n : {1ull, 2ull, 3ull, 7ull, 10ull, 1000003ull, (1ull << 33) + 1, (1ull << 63) + 5, ~0ull}) {
    for (int i = 0; i < 2000; ++i) {
      const std::uint64_t v = g.below(n);
      ASSERT_LT(v, n) << "n = " << n;
    }
  }
  for (int i = 0; i < 100; ++i) EXPECT_EQ(g.below(1), 0u);
}

TEST(Generator, BelowIsUniform) {
  Generator g(4);
  for (std::uint64_t n : {7ull, 10ull}) {
    std::vector<int> counts(n);
    for (int i = 0; i < 70000; ++i) ++counts[g.below(n)];
    // df = n - 1 <= 9: chi-square above 33 has p < 1e-4.
    EXPECT_LT(chiSquare(counts), 33.0) << "n = " << n;
  }
  // Values near 2^63 exercise the rejection threshold: both halves appear.
  const std::uint64_t big = (1ull << 63) + (1ull << 62);
  int upper = 0;
  for (int i = 0; i < 3000; ++i) upper += g.below(big) >= big / 2;
  EXPECT_GT(upper, 1300);
  EXPECT_LT(upper, 1700);
}

TEST(Generator, UniformHas24BitsInTheUnitInterval) {
  Generator g(5);
  double sum = 0;
  std::vector<int> deciles(10);
  for (int i = 0; i < 100000; ++i) {
    const float u = g.uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    const float scaled = u * 16777216.0f;
    ASSERT_EQ(scaled, std::floor(scaled)) << "a multiple of 2^-24";
    sum += u;
    ++deciles[static_cast<std::size_t>(u * 10)];
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
  EXPECT_LT(chiSquare(deciles), 33.0);
  Generator h(6);
  for (int i = 0; i < 1000; ++i) {
    const float v = h.uniform(-2.0f, 3.0f);
    ASSERT_GE(v, -2.0f);
    ASSERT_LT(v, 3.0f);
  }
}

TEST(Generator, NormalHasZeroMeanAndUnitVariance) {
  Generator g(7);
  double sum = 0, sq = 0;
  int beyond2 = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double v = g.normal();
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sq += v * v;
    beyond2 += std::abs(v) > 2.0;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.015);
  EXPECT_NEAR(sq / n, 1.0, 0.02);
  EXPECT_NEAR(static_cast<double>(beyond2) / n, 0.0455, 0.004) << "the tails of a Gaussian";
}

TEST(RandomPermutation, IsAPermutationForAnySize) {
  Generator g(8);
  for (std::int64_t n : {0, 1, 2, 7, 1000}) {
    std::vector<std::int64_t> p = randomPermutation(n, g);
    ASSERT_EQ(static_cast<std::int64_t>(p.size()), n);
    std::sort(p.begin(), p.end());
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(p[static_cast<std::size_t>(i)], i);
  }
  Generator a(9), b(9);
  EXPECT_EQ(randomPermutation(50, a), randomPermutation(50, b));
  EXPECT_NE(randomPermutation(50, a), randomPermutation(50, b = Generator(10)));
}

TEST(RandomPermutation, EveryOrderIsEquallyLikely) {
  Generator g(11);
  std::map<std::vector<std::int64_t>, int> seen;
  for (int i = 0; i < 24000; ++i) ++seen[randomPermutation(4, g)];
  ASSERT_EQ(seen.size(), 24u);
  std::vector<int> counts;
  for (const auto& [perm, c] : seen) counts.push_back(c);
  // df = 23: chi-square above 56 has p < 1e-4.
  EXPECT_LT(chiSquare(counts), 56.0);
}

}  // namespace
}  // namespace hpu::core
