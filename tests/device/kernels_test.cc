// The compute kernels against plain reference implementations written out
// here loop by loop, on odd sizes, with stride/padding variants, and their
// determinism for any thread count. The matrix kernels' tests (Gemm*,
// Conv*) run once more per instruction set, forced by HPU_CPU_ISA
// (tests/device/CMakeLists.txt); a path this CPU cannot run skips.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "hpu/device/cpu_isa.h"
#include "hpu/device/errors.h"
#include "hpu/device/kernels/activation.h"
#include "hpu/device/kernels/conv.h"
#include "hpu/device/kernels/gemm.h"
#include "hpu/device/kernels/loss.h"
#include "hpu/device/kernels/norm.h"
#include "hpu/device/kernels/pool.h"
#include "hpu/device/numerics.h"
#include "hpu/device/threading.h"

namespace hpu::device::kernels {
namespace {

// HPU_CPU_ISA as ctest sets it for this process (tests/device/CMakeLists.txt).
Environment forcedIsaEnvironment() {
  const char* isa = std::getenv("HPU_CPU_ISA");
  return isa == nullptr ? Environment{} : Environment{{"HPU_CPU_ISA", isa}};
}

// Why HPU_CPU_ISA names a path this CPU cannot run ("" when it can, or is unset).
std::string forcedIsaMissing() {
  try {
    cpuIsaFromEnv(forcedIsaEnvironment());
    return "";
  } catch (const EmulatorConfigError& e) {
    return e.what();
  }
}

// The kernels run on the forced path, as hpu-train's start-up makes them.
const bool kForcedIsaInstalled = [] {
  if (std::getenv("HPU_CPU_ISA") != nullptr && forcedIsaMissing().empty())
    setCpuIsa(cpuIsaFromEnv(forcedIsaEnvironment()));
  return true;
}();
#define SKIP_UNLESS_FORCED_ISA_RUNS()                             \
  if (const std::string why = forcedIsaMissing(); !why.empty()) { \
    GTEST_SKIP() << why;                                          \
  }

std::vector<float> randomVector(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

void expectNear(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << "at " << i;
}

struct GemmCase {
  bool ta, tb;
  std::int64_t m, n, k;
};

// Normal samples rounded to bfloat16 (as a bf16 tensor stores them: float32
// with the low 16 bits zero).
std::vector<float> bf16Vector(std::size_t n, unsigned seed) {
  std::vector<float> v = randomVector(n, seed);
  roundInPlace(v, DType::kBFloat16);
  return v;
}

class GemmTest : public ::testing::TestWithParam<std::tuple<GemmCase, GemmOperands>> {};

TEST_P(GemmTest, MatchesReferenceForEveryTransposeAndBeta) {
  SKIP_UNLESS_FORCED_ISA_RUNS();
  const auto [shape, operands] = GetParam();
  const auto [ta, tb, m, n, k] = shape;
  const bool bf16 = operands == GemmOperands::kBFloat16;
  const auto make = [bf16](std::size_t size, unsigned seed) {
    return bf16 ? bf16Vector(size, seed) : randomVector(size, seed);
  };
  const auto a = make(static_cast<std::size_t>(m * k), 1), b = make(static_cast<std::size_t>(k * n), 2);
  const auto c0 = randomVector(static_cast<std::size_t>(m * n), 3);
  for (float beta : {0.0f, 1.0f}) {
    std::vector<double> want(static_cast<std::size_t>(m * n));
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double s = beta * c0[static_cast<std::size_t>(i * n + j)];
        for (std::int64_t p = 0; p < k; ++p) {
          const double av = ta ? a[static_cast<std::size_t>(p * m + i)] : a[static_cast<std::size_t>(i * k + p)];
          const double bv = tb ? b[static_cast<std::size_t>(j * k + p)] : b[static_cast<std::size_t>(p * n + j)];
          s += av * bv;
        }
        want[static_cast<std::size_t>(i * n + j)] = s;
      }
    std::vector<float> c = c0;
    gemm(ta, tb, m, n, k, a.data(), b.data(), beta, c.data(), operands);
    // fp32 sums of k products (exact products for bf16 operands).
    expectNear(c, want, 1e-6 * static_cast<double>(k) + 1e-5);
  }
}

// Sizes on both sides of the kernel's 8 x 48 tile, 256-deep k blocks (odd k:
// a bf16 pair half empty), and products large enough to be cut into chunks
// by rows (300, 688) or columns (few rows).
INSTANTIATE_TEST_SUITE_P(
    Shapes, GemmTest,
    ::testing::Combine(::testing::Values(GemmCase{false, false, 1, 1, 1}, GemmCase{false, true, 7, 5, 3},
                                         GemmCase{true, false, 33, 17, 9}, GemmCase{true, true, 4, 64, 65},
                                         GemmCase{false, true, 64, 256, 784}, GemmCase{false, false, 300, 200, 513},
                                         GemmCase{true, false, 688, 100, 301}, GemmCase{false, true, 20, 700, 333}),
                       ::testing::Values(GemmOperands::kFloat32, GemmOperands::kBFloat16)));

// On 1, 2 and 3 threads: products of one phase (A's rows shared out with B
// packed by each thread; a weight gradient A^T B in two halves of k) and of
// several (k = 1300: C's blocks shared out by rows), A and B transposed or
// not, C overwritten or accumulated.
TEST(GemmDeterminism, SameBitsForAnyThreadCount) {
  SKIP_UNLESS_FORCED_ISA_RUNS();
  struct Shape3 {
    std::int64_t m, n, k;
  };
  for (GemmOperands operands : {GemmOperands::kFloat32, GemmOperands::kBFloat16})
    for (const Shape3 s : {Shape3{700, 260, 300}, Shape3{200, 300, 301}, Shape3{700, 260, 1300}}) {
      const auto a = bf16Vector(static_cast<std::size_t>(s.m * s.k), 4);
      const auto b = bf16Vector(static_cast<std::size_t>(s.k * s.n), 5);
      const auto c0 = randomVector(static_cast<std::size_t>(s.m * s.n), 6);
      const auto run = [&](int threads, bool ta, bool tb, float beta) {
        const int before = intraOpThreads();
        setIntraOpThreads(threads);
        setAlwaysParallelForTesting(true);  // on the team whatever the cost model says
        std::vector<float> c = c0;
        gemm(ta, tb, s.m, s.n, s.k, a.data(), b.data(), beta, c.data(), operands);
        setAlwaysParallelForTesting(false);
        setIntraOpThreads(before);
        return c;
      };
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (float beta : {0.0f, 1.0f}) {
            SCOPED_TRACE(::testing::Message() << s.m << "x" << s.n << "x" << s.k << " ta " << ta << " tb " << tb
                                              << " beta " << beta);
            const auto one = run(1, ta, tb, beta);
            EXPECT_EQ(one, run(2, ta, tb, beta));
            EXPECT_EQ(one, run(3, ta, tb, beta));
          }
    }
}

// gemmSerial on strided matrices (each row padded by 3 floats that must stay
// untouched), with sizes on both sides of the packed kernel's 8-row, 32-column,
// 96-row, 256-column and 256-deep blocks.
class GemmSerialTest : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmSerialTest, MatchesReferenceOnStridedMatrices) {
  SKIP_UNLESS_FORCED_ISA_RUNS();
  const auto [ta, tb, m, n, k] = GetParam();
  const std::int64_t pad = 3, a_cols = ta ? m : k, b_cols = tb ? k : n;
  const std::int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
  const auto a = randomVector(static_cast<std::size_t>((ta ? k : m) * lda), 4);
  const auto b = randomVector(static_cast<std::size_t>((tb ? n : k) * ldb), 5);
  const auto c0 = randomVector(static_cast<std::size_t>(m * ldc), 6);
  for (bool accumulate : {false, true}) {
    std::vector<double> want(c0.begin(), c0.end());
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double s = accumulate ? c0[static_cast<std::size_t>(i * ldc + j)] : 0.0;
        for (std::int64_t p = 0; p < k; ++p)
          s += static_cast<double>(a[static_cast<std::size_t>(ta ? p * lda + i : i * lda + p)]) *
               b[static_cast<std::size_t>(tb ? j * ldb + p : p * ldb + j)];
        want[static_cast<std::size_t>(i * ldc + j)] = s;
      }
    std::vector<float> c = c0;
    gemmSerial(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, accumulate, c.data(), ldc);
    expectNear(c, want, 1e-4);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmSerialTest,
                         ::testing::Values(GemmCase{false, false, 1, 1, 1}, GemmCase{false, false, 9, 33, 15},
                                           GemmCase{true, false, 97, 300, 257}, GemmCase{false, true, 7, 17, 40},
                                           GemmCase{false, true, 64, 288, 300}, GemmCase{true, true, 8, 32, 16},
                                           GemmCase{true, false, 288, 40, 64}, GemmCase{false, false, 5, 3, 0}));

// Every path this CPU runs computes the same products, to rounding; on the
// packed kernels gemmSerial gives gemm's bits.
TEST(GemmIsa, EveryPathThisCpuRunsAgrees) {
  SKIP_UNLESS_FORCED_ISA_RUNS();
  const CpuIsa before = cpuIsa();
  constexpr std::int64_t m = 97, n = 130, k = 300;
  const auto a = bf16Vector(m * k, 7), b = bf16Vector(n * k, 8);
  std::vector<double> first;
  for (CpuIsa isa : supportedCpuIsas())
    for (GemmOperands operands : {GemmOperands::kFloat32, GemmOperands::kBFloat16}) {
      setCpuIsa(isa);
      std::vector<float> c(m * n), serial(m * n);
      gemm(false, true, m, n, k, a.data(), b.data(), 0.0f, c.data(), operands);
      gemmSerial(false, true, m, n, k, a.data(), k, b.data(), k, false, serial.data(), n, operands);
      if (isa != CpuIsa::kPortable) {
        EXPECT_EQ(c, serial) << cpuIsaName(isa);
      }
      if (first.empty())
        first.assign(c.begin(), c.end());
      else
        expectNear(c, first, 1e-5);
    }
  setCpuIsa(before);
}

TEST(GemmIsa, HpuCpuIsaPicksThePath) {
  SKIP_UNLESS_FORCED_ISA_RUNS();
  const char* forced = std::getenv("HPU_CPU_ISA");
  EXPECT_EQ(cpuIsaName(cpuIsaFromEnv(forcedIsaEnvironment())),
            forced != nullptr ? forced : cpuIsaName(defaultCpuIsa()));
  EXPECT_EQ(cpuIsaFromEnv(Environment{{"HPU_CPU_ISA", "portable"}}), CpuIsa::kPortable);
  EXPECT_EQ(cpuIsaFromEnv(Environment{}), defaultCpuIsa());
  // The default is the best this CPU runs, or avx512 in place of avx512_bf16
  // where VDPBF16PS does not pay, measured once: the same answer every time.
  const CpuIsa best = supportedCpuIsas().back(), chosen = defaultCpuIsa();
  if (best == CpuIsa::kAvx512Bf16)
    EXPECT_TRUE(chosen == best || chosen == CpuIsa::kAvx512) << cpuIsaName(chosen);
  else
    EXPECT_EQ(chosen, best);
  EXPECT_EQ(defaultCpuIsa(), chosen);
  try {
    cpuIsaFromEnv(Environment{{"HPU_CPU_ISA", "avx9"}});
    FAIL() << "avx9 accepted";
  } catch (const EmulatorConfigError& e) {
    std::string runs;
    for (CpuIsa isa : supportedCpuIsas()) runs += (runs.empty() ? "" : ", ") + std::string(cpuIsaName(isa));
    EXPECT_EQ(std::string(e.what()), "HPU_CPU_ISA: unknown instruction set 'avx9'; this CPU runs " + runs);
  }
}

TEST(GemmHelpers, ColumnSums) {
  std::vector<float> y{11, 22, 33, 14, 25, 36}, s(3, 1.0f);
  columnSums(y.data(), 2, 3, s.data(), /*accumulate=*/true);
  EXPECT_EQ(s, (std::vector<float>{26, 48, 70}));
  columnSums(y.data(), 2, 3, s.data(), /*accumulate=*/false);
  EXPECT_EQ(s, (std::vector<float>{25, 47, 69}));
}

// The bias and ReLU epilogue gives the bits of the product followed by the
// two passes, on every instruction set, 1 and 2 threads, for shapes whose
// blocks of C end mid-tile; an empty product (k = 0) still gets it.
TEST(GemmEpilogue, SameBitsAsBiasThenReluAfterTheProduct) {
  SKIP_UNLESS_FORCED_ISA_RUNS();
  struct Shape3 {
    std::int64_t m, n, k;
  };
  for (const Shape3 s : {Shape3{64, 256, 784}, Shape3{37, 70, 19}, Shape3{5, 3, 0}})
    for (const bool relu : {false, true})
      for (const int threads : {1, 2}) {
        SCOPED_TRACE(::testing::Message() << s.m << "x" << s.n << "x" << s.k << " relu " << relu << " threads "
                                          << threads);
        const auto a = randomVector(static_cast<std::size_t>(s.m * s.k), 31);
        const auto b = randomVector(static_cast<std::size_t>(s.n * s.k), 32);
        const auto bias = randomVector(static_cast<std::size_t>(s.n), 33);
        const int before = intraOpThreads();
        setIntraOpThreads(threads);
        setAlwaysParallelForTesting(true);
        std::vector<float> want(static_cast<std::size_t>(s.m * s.n)), got(want.size());
        gemm(false, true, s.m, s.n, s.k, a.data(), b.data(), 0.0f, want.data());
        gemm(false, true, s.m, s.n, s.k, a.data(), b.data(), 0.0f, got.data(), GemmOperands::kFloat32,
             {bias.data(), relu});
        setAlwaysParallelForTesting(false);
        setIntraOpThreads(before);
        for (std::int64_t r = 0; r < s.m; ++r)
          for (std::int64_t j = 0; j < s.n; ++j) {
            float& v = want[static_cast<std::size_t>(r * s.n + j)];
            v = v + bias[static_cast<std::size_t>(j)];
            if (relu) v = v > 0.0f ? v : 0.0f;
          }
        EXPECT_EQ(got, want);
        if (relu && s.k > 0) {
          EXPECT_GT(std::count(got.begin(), got.end(), 0.0f), 0);
        }
        // Dropout in place (as linearRelu runs it) gives dropoutForward's bits.
        std::vector<float> dropped(want.size()), mask(want.size()), in_place_mask(want.size());
        dropoutForward(0x5EED, 0.3f, want.data(), dropped.data(), mask.data(), s.m * s.n);
        dropoutForward(0x5EED, 0.3f, got.data(), got.data(), in_place_mask.data(), s.m * s.n);
        EXPECT_EQ(got, dropped);
        EXPECT_EQ(in_place_mask, mask);
      }
}

struct ConvCase {
  std::int64_t n, c, h, w, k, r, stride, pad;
};

class ConvTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvTest, ForwardAndBackwardMatchDirectLoops) {
  SKIP_UNLESS_FORCED_ISA_RUNS();
  const ConvCase p = GetParam();
  const Conv2dShape g{p.n, p.c, p.h, p.w, p.k, p.r, p.r, p.stride, p.pad};
  const std::int64_t oh = g.outH(), ow = g.outW();
  const auto x = randomVector(static_cast<std::size_t>(p.n * p.c * p.h * p.w), 4);
  const auto w = randomVector(static_cast<std::size_t>(p.k * p.c * p.r * p.r), 5);
  const auto b = randomVector(static_cast<std::size_t>(p.k), 6);
  const auto dy = randomVector(static_cast<std::size_t>(p.n * p.k * oh * ow), 7);
  auto X = [&](std::int64_t n, std::int64_t c, std::int64_t i, std::int64_t j) -> double {
    if (i < 0 || i >= p.h || j < 0 || j >= p.w) return 0.0;
    return x[static_cast<std::size_t>(((n * p.c + c) * p.h + i) * p.w + j)];
  };
  auto W = [&](std::int64_t k, std::int64_t c, std::int64_t i, std::int64_t j) {
    return static_cast<double>(w[static_cast<std::size_t>(((k * p.c + c) * p.r + i) * p.r + j)]);
  };
  std::vector<double> y_ref(dy.size()), dx_ref(x.size(), 0.0), dw_ref(w.size(), 0.0), db_ref(b.size(), 0.0);
  for (std::int64_t n = 0; n < p.n; ++n)
    for (std::int64_t k = 0; k < p.k; ++k)
      for (std::int64_t oy = 0; oy < oh; ++oy)
        for (std::int64_t ox = 0; ox < ow; ++ox) {
          const std::size_t o = static_cast<std::size_t>(((n * p.k + k) * oh + oy) * ow + ox);
          double s = b[static_cast<std::size_t>(k)];
          for (std::int64_t c = 0; c < p.c; ++c)
            for (std::int64_t i = 0; i < p.r; ++i)
              for (std::int64_t j = 0; j < p.r; ++j) {
                const std::int64_t iy = oy * p.stride + i - p.pad, ix = ox * p.stride + j - p.pad;
                s += X(n, c, iy, ix) * W(k, c, i, j);
                if (iy >= 0 && iy < p.h && ix >= 0 && ix < p.w) {
                  dx_ref[static_cast<std::size_t>(((n * p.c + c) * p.h + iy) * p.w + ix)] += dy[o] * W(k, c, i, j);
                  dw_ref[static_cast<std::size_t>(((k * p.c + c) * p.r + i) * p.r + j)] += dy[o] * X(n, c, iy, ix);
                }
              }
          y_ref[o] = s;
          db_ref[static_cast<std::size_t>(k)] += dy[o];
        }
  std::vector<float> y(dy.size()), dx(x.size()), dw(w.size()), db(b.size());
  conv2dForward(g, x.data(), w.data(), b.data(), y.data());
  expectNear(y, y_ref, 1e-4);
  conv2dBackward(g, x.data(), w.data(), dy.data(), dx.data(), false, dw.data(), false, db.data(), false);
  expectNear(dx, dx_ref, 1e-4);
  expectNear(dw, dw_ref, 1e-4);
  expectNear(db, db_ref, 1e-4);
  // Accumulation adds to what is there.
  conv2dBackward(g, x.data(), w.data(), dy.data(), dx.data(), true, dw.data(), true, db.data(), true);
  for (auto& v : dx_ref) v *= 2;
  expectNear(dx, dx_ref, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Shapes, ConvTest,
                         ::testing::Values(ConvCase{1, 1, 5, 5, 1, 3, 1, 0}, ConvCase{2, 3, 7, 6, 4, 3, 1, 1},
                                           ConvCase{3, 2, 9, 9, 5, 3, 2, 1}, ConvCase{2, 1, 28, 28, 8, 5, 1, 2},
                                           ConvCase{1, 4, 4, 4, 2, 1, 1, 0},
                                           // A 1-channel first layer: 9 taps, 32 filters, the weight
                                           // gradient computed transposed.
                                           ConvCase{3, 1, 12, 12, 32, 3, 1, 1},
                                           // pad >= kernel (like stride 2 above): the input gradient
                                           // by col2im, not as a convolution.
                                           ConvCase{2, 2, 4, 4, 3, 1, 1, 1},
                                           // The CNN's second layer on 9 images: chunks of 4, the last partial.
                                           ConvCase{9, 32, 14, 14, 64, 3, 1, 1}));

TEST(ConvDeterminism, SameBitsForAnyThreadCount) {
  SKIP_UNLESS_FORCED_ISA_RUNS();
  const Conv2dShape g{9, 16, 14, 14, 32, 3, 3, 1, 1};
  const auto x = randomVector(static_cast<std::size_t>(9 * 16 * 14 * 14), 8);
  const auto w = randomVector(static_cast<std::size_t>(32 * 16 * 9), 9);
  const auto dy = randomVector(static_cast<std::size_t>(9 * 32 * 14 * 14), 10);
  const auto run = [&](int threads) {
    const int before = intraOpThreads();
    setIntraOpThreads(threads);
    setAlwaysParallelForTesting(true);
    std::vector<float> y(dy.size()), dx(x.size()), dw(w.size()), db(32);
    conv2dForward(g, x.data(), w.data(), nullptr, y.data());
    conv2dBackward(g, x.data(), w.data(), dy.data(), dx.data(), false, dw.data(), false, db.data(), false);
    setAlwaysParallelForTesting(false);
    setIntraOpThreads(before);
    return std::vector<std::vector<float>>{y, dx, dw, db};
  };
  const auto one = run(1);
  EXPECT_EQ(one, run(1));
  EXPECT_EQ(one, run(2));
  EXPECT_EQ(one, run(3));
}

// The fused convolution + 2x2 max pool gives the bits of the two kernels one
// after the other: pooled values, arg-max, and every gradient (accumulated
// or not), with and without bias, for odd output sizes (the last row and
// column dropped) and on 1 and 2 threads.
TEST(ConvMaxPool, SameBitsAsConvolutionThenPooling) {
  SKIP_UNLESS_FORCED_ISA_RUNS();
  const Conv2dShape shapes[] = {{9, 3, 14, 14, 8, 3, 3, 1, 1}, {5, 2, 7, 9, 4, 3, 3, 1, 1}, {3, 4, 11, 8, 6, 2, 2, 1, 0}};
  for (const Conv2dShape& g : shapes)
    for (const bool bias : {true, false})
      for (const bool accumulate : {false, true})
        for (const int threads : {1, 2}) {
          SCOPED_TRACE(::testing::Message() << "k " << g.k << " h " << g.h << " bias " << bias << " accumulate "
                                            << accumulate << " threads " << threads);
          const int before = intraOpThreads();
          setIntraOpThreads(threads);
          setAlwaysParallelForTesting(true);
          const std::int64_t oh = g.outH(), ow = g.outW();
          const Pool2dShape pool{g.n * g.k, oh, ow, 2, 2, 0};
          const auto q = static_cast<std::size_t>(g.n * g.k * pool.outH() * pool.outW());
          const auto x = randomVector(static_cast<std::size_t>(g.n * g.c * g.h * g.w), 21);
          const auto w = randomVector(static_cast<std::size_t>(g.k * g.c * g.r * g.s), 22);
          const auto b = randomVector(static_cast<std::size_t>(g.k), 23);
          const auto dy = randomVector(q, 24);
          const float* bp = bias ? b.data() : nullptr;
          // Two kernels.
          std::vector<float> conv(static_cast<std::size_t>(g.n * g.k * oh * ow)), y(q), dconv(conv.size());
          std::vector<std::int32_t> arg(q);
          conv2dForward(g, x.data(), w.data(), bp, conv.data());
          maxPool2dForward(pool, conv.data(), y.data(), arg.data());
          maxPool2dBackward(pool, dy.data(), arg.data(), dconv.data(), false);
          std::vector<float> dx(x.size(), 0.5f), dw(w.size(), 0.25f), db(b.size(), 0.125f);
          conv2dBackward(g, x.data(), w.data(), dconv.data(), dx.data(), accumulate, dw.data(), accumulate,
                         db.data(), accumulate);
          // Fused.
          std::vector<float> fy(q);
          std::vector<std::int32_t> farg(q);
          conv2dMaxPoolForward(g, x.data(), w.data(), bp, fy.data(), farg.data());
          std::vector<float> fdx(x.size(), 0.5f), fdw(w.size(), 0.25f), fdb(b.size(), 0.125f);
          conv2dMaxPoolBackward(g, x.data(), w.data(), dy.data(), farg.data(), fdx.data(), accumulate, fdw.data(),
                                accumulate, fdb.data(), accumulate);
          setAlwaysParallelForTesting(false);
          setIntraOpThreads(before);
          EXPECT_EQ(fy, y);
          EXPECT_EQ(farg, arg);
          EXPECT_EQ(fdx, dx);
          EXPECT_EQ(fdw, dw);
          EXPECT_EQ(fdb, db);
        }
}

TEST(Pool, MaxAndAveragePoolingMatchLoops) {
  const Pool2dShape g{3, 7, 6, 3, 2, 1};
  const auto x = randomVector(static_cast<std::size_t>(3 * 7 * 6), 11);
  const std::int64_t oh = g.outH(), ow = g.outW();
  std::vector<float> y(static_cast<std::size_t>(3 * oh * ow)), avg(y.size());
  std::vector<std::int32_t> arg(y.size());
  maxPool2dForward(g, x.data(), y.data(), arg.data());
  avgPool2dForward(g, x.data(), avg.data());
  for (std::int64_t p = 0; p < 3; ++p)
    for (std::int64_t oy = 0; oy < oh; ++oy)
      for (std::int64_t ox = 0; ox < ow; ++ox) {
        float best = -INFINITY;
        double s = 0;
        for (std::int64_t i = 0; i < 3; ++i)
          for (std::int64_t j = 0; j < 3; ++j) {
            const std::int64_t iy = oy * 2 + i - 1, ix = ox * 2 + j - 1;
            if (iy < 0 || iy >= 7 || ix < 0 || ix >= 6) continue;
            best = std::max(best, x[static_cast<std::size_t>((p * 7 + iy) * 6 + ix)]);
            s += x[static_cast<std::size_t>((p * 7 + iy) * 6 + ix)];
          }
        const std::size_t o = static_cast<std::size_t>((p * oh + oy) * ow + ox);
        EXPECT_EQ(y[o], best);
        EXPECT_EQ(x[static_cast<std::size_t>(p * 42 + arg[o])], best);
        EXPECT_NEAR(avg[o], s / 9.0, 1e-5);
      }
  std::vector<float> dy(y.size(), 1.0f), dx(x.size());
  maxPool2dBackward(g, dy.data(), arg.data(), dx.data(), false);
  double total = 0;
  for (float v : dx) total += v;
  EXPECT_EQ(total, static_cast<double>(y.size()));  // every window routes its 1 to one input
}

TEST(Activations, ForwardValuesAndDerivatives) {
  const std::vector<float> x{-2.0f, -0.5f, 0.0f, 0.7f, 3.0f};
  const std::vector<float> dy(x.size(), 1.0f);
  struct Case {
    Activation a;
    double (*f)(double);
  };
  const Case cases[] = {
      {Activation::kReLU, [](double v) { return v > 0 ? v : 0.0; }},
      {Activation::kGELU, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
      {Activation::kGELUTanh,
       [](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); }},
      {Activation::kTanh, [](double v) { return std::tanh(v); }},
      {Activation::kSigmoid, [](double v) { return 1 / (1 + std::exp(-v)); }},
  };
  for (const Case& c : cases) {
    std::vector<float> y(x.size()), dx(x.size());
    activationForward(c.a, x.data(), y.data(), static_cast<std::int64_t>(x.size()));
    activationBackward(c.a, x.data(), y.data(), dy.data(), dx.data(), static_cast<std::int64_t>(x.size()), false);
    for (std::size_t i = 0; i < x.size(); ++i) {
      EXPECT_NEAR(y[i], c.f(x[i]), 1e-6) << static_cast<int>(c.a) << " at " << x[i];
      if (c.a == Activation::kReLU && x[i] == 0.0f) continue;  // not differentiable there
      const double h = 1e-4, fd = (c.f(x[i] + h) - c.f(x[i] - h)) / (2 * h);
      EXPECT_NEAR(dx[i], fd, 1e-4) << static_cast<int>(c.a) << " at " << x[i];
    }
  }
}

TEST(Loss, CrossEntropyWithLabelSmoothingMatchesDefinition) {
  // The third row's label is ignore_index: it counts for nothing.
  const std::vector<float> logits{1.0f, 2.0f, 0.5f, -1.0f, 0.0f, 3.0f, 7.0f, -2.0f, 1.0f};
  const std::vector<std::int64_t> labels{1, 2, -100};
  std::vector<float> lse(3), d(9, 5.0f);
  const float s = 0.1f;
  std::int64_t counted = 0;
  const double loss = crossEntropyForward(logits.data(), labels.data(), 3, 3, s, -100, lse.data(), &counted) / counted;
  EXPECT_EQ(counted, 2);
  double want = 0;
  for (int r = 0; r < 2; ++r) {
    double z = 0;
    for (int j = 0; j < 3; ++j) z += std::exp(static_cast<double>(logits[r * 3 + j]));
    double smooth = 0;
    for (int j = 0; j < 3; ++j) smooth -= std::log(std::exp(static_cast<double>(logits[r * 3 + j])) / z);
    const double nll = -std::log(std::exp(static_cast<double>(logits[r * 3 + labels[r]])) / z);
    want += (1 - s) * nll + s * smooth / 3;
  }
  EXPECT_NEAR(loss, want / 2, 1e-6);
  crossEntropyBackward(logits.data(), labels.data(), lse.data(), 3, 3, s, -100, 0.5f, d.data(), false);
  for (int r = 0; r < 2; ++r) {
    double z = 0;
    for (int j = 0; j < 3; ++j) z += std::exp(static_cast<double>(logits[r * 3 + j]));
    for (int j = 0; j < 3; ++j) {
      const double target = (j == labels[r] ? 1 - s : 0.0) + s / 3;
      EXPECT_NEAR(d[r * 3 + j], (std::exp(static_cast<double>(logits[r * 3 + j])) / z - target) * 0.5, 1e-6);
    }
  }
  for (int j = 0; j < 3; ++j) EXPECT_EQ(d[6 + j], 0.0f) << "an ignored row gets no gradient";
  EXPECT_EQ(countArgmaxMatches(logits.data(), labels.data(), 2, 3), 2);
}

TEST(Norm, LayerNormNormalisesRows) {
  const auto x = randomVector(3 * 10, 12);
  std::vector<float> y(x.size()), stats(6);
  layerNormForward(x.data(), 3, 10, nullptr, nullptr, 1e-5f, y.data(), stats.data());
  for (int r = 0; r < 3; ++r) {
    double m = 0, v = 0;
    for (int i = 0; i < 10; ++i) m += y[r * 10 + i];
    for (int i = 0; i < 10; ++i) v += (y[r * 10 + i] - m / 10) * (y[r * 10 + i] - m / 10);
    EXPECT_NEAR(m / 10, 0.0, 1e-6);
    EXPECT_NEAR(v / 10, 1.0, 1e-3);
  }
}

TEST(Threading, DefaultSplitsCoresAcrossLocalProcesses) {
  EXPECT_GE(defaultIntraOpThreads(1), 1);
  EXPECT_EQ(defaultIntraOpThreads(1000), 1);
  const int before = intraOpThreads();
  setIntraOpThreads(1);
  EXPECT_EQ(intraOpThreads(), 1);
  setIntraOpThreads(before);
}

}  // namespace
}  // namespace hpu::device::kernels
