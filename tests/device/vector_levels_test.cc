// The hot elementwise loops run in a copy per vector level (vector_clones.h),
// chosen by cpuIsa(): every copy this CPU runs gives the same bits as the
// baseline one, for the rounding to narrow floats (NaN, infinities,
// subnormals, ties), dropout, SwiGLU and its gradients, the softmax of the
// cross-entropy and attention's e^x loops (and their sums over lanes); the
// 2x2 max pool's kernel, the same maxima and arg-max indices.
// (Attention as a whole also runs the matrix kernels, whose paths differ in
// summation order: kernels_test.cc compares those within rounding.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "hpu/device/cpu_isa.h"
#include "hpu/device/kernels/activation.h"
#include "hpu/device/kernels/loss.h"
#include "hpu/device/kernels/pool.h"
#include "hpu/device/numerics.h"
#include "../../device/src/kernels/exp_loops.h"

namespace hpu::device {
namespace {

std::vector<float> sample(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  // Edges: NaN, infinities, subnormals, signed zeros, halfway cases.
  const float edges[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                         -std::numeric_limits<float>::infinity(), 1e-40f, -1e-41f, 0.0f, -0.0f, 1.00390625f,
                         65504.0f, 70000.0f, 448.0f, 500.0f, 57344.0f, -88.9f, 88.9f};
  for (std::size_t i = 0; i < std::size(edges) && i < n; ++i) v[i * 7 % n] = edges[i];
  return v;
}

// Everything `run` computes, concatenated.
template <class Run>
std::vector<float> valuesOf(const Run& run) {
  std::vector<float> out;
  for (const std::vector<float>& v : run()) out.insert(out.end(), v.begin(), v.end());
  return out;
}

// Runs `run` on every level this CPU has and expects the baseline's bits
// (a NaN may carry another payload: which operand's NaN propagates is the
// instruction's choice).
template <class Run>
void expectEveryLevelAgrees(const char* what, const Run& run) {
  const CpuIsa before = cpuIsa();
  setCpuIsa(CpuIsa::kPortable);
  const std::vector<float> baseline = valuesOf(run);
  for (CpuIsa isa : supportedCpuIsas()) {
    setCpuIsa(isa);
    const std::vector<float> got = valuesOf(run);
    ASSERT_EQ(got.size(), baseline.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      const bool same = std::memcmp(&got[i], &baseline[i], sizeof(float)) == 0 ||
                        (std::isnan(got[i]) && std::isnan(baseline[i]));
      ASSERT_TRUE(same) << what << " on " << cpuIsaName(isa) << ", value " << i << ": " << got[i]
                        << " where the baseline copy gives " << baseline[i];
    }
  }
  setCpuIsa(before);
}

TEST(VectorLevels, EveryCopyOfTheElementwiseLoopsGivesTheBaselineBits) {
  ASSERT_GE(supportedCpuIsas().size(), 1u);
  const std::size_t n = 4099;  // not a multiple of any vector width
  const std::vector<float> x = sample(n, 1), y = sample(n, 2), dy = sample(n, 3);

  for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat8E4M3, DType::kFloat8E5M2})
    expectEveryLevelAgrees(dtypeName(t).data(), [&] {
      std::vector<float> v = x;
      roundInPlace(v, t);
      return std::vector<std::vector<float>>{v};
    });

  expectEveryLevelAgrees("dropout", [&] {
    std::vector<float> out(n), mask(n), dx(n, 1.0f);
    kernels::dropoutForward(0x1234, 0.3f, x.data(), out.data(), mask.data(), static_cast<std::int64_t>(n));
    kernels::dropoutBackward(mask.data(), dy.data(), dx.data(), static_cast<std::int64_t>(n), true);
    return std::vector<std::vector<float>>{out, mask, dx};
  });

  expectEveryLevelAgrees("swiglu", [&] {
    std::vector<float> out(n), dgate(n), dup(n, 0.5f);
    kernels::swigluForward(x.data(), y.data(), out.data(), static_cast<std::int64_t>(n));
    kernels::swigluBackward(x.data(), y.data(), dy.data(), dgate.data(), dup.data(), static_cast<std::int64_t>(n), false);
    return std::vector<std::vector<float>>{out, dgate, dup};
  });

  expectEveryLevelAgrees("cross-entropy and softmax", [&] {
    constexpr std::int64_t rows = 7, classes = 585;
    std::vector<float> logits(x.begin(), x.begin() + rows * classes);
    for (float& v : logits)
      if (!std::isfinite(v)) v = 1.0f;
    std::vector<std::int64_t> labels{0, 5, 584, 17, 300, 2, 99};
    std::vector<float> lse(rows), grad(rows * classes), soft(rows * classes);
    std::int64_t counted = 0;
    const double loss = kernels::crossEntropyForward(logits.data(), labels.data(), rows, classes, 0.1f, -100,
                                                     lse.data(), &counted);
    kernels::crossEntropyBackward(logits.data(), labels.data(), lse.data(), rows, classes, 0.1f, -100, 0.5f,
                                  grad.data(), false);
    kernels::softmaxForward(logits.data(), rows, classes, soft.data());
    return std::vector<std::vector<float>>{lse, grad, soft, {static_cast<float>(loss)}};
  });

  expectEveryLevelAgrees("attention's softmax loops", [&] {
    std::vector<float> a(x.begin(), x.begin() + 1001), b(y.begin(), y.begin() + 1001);
    for (auto* t : {&a, &b})
      for (float& e : *t)
        if (std::isnan(e)) e = -std::numeric_limits<float>::infinity();  // a masked score
    const float sum = kernels::detail::expShiftSum(a.data(), 1001, 2.5f);
    kernels::detail::expShift(b.data(), 1001, -1.5f);
    return std::vector<std::vector<float>>{a, b, {sum}};
  });
}

// The 2x2 max pool has its own AVX-512 kernel (isa/pool_avx512.h): the same
// maxima and arg-max indices as the scalar loop, on rows of 1 to 17 windows
// (masked tails, two vector steps), odd heights and widths, NaNs, and ties
// (ReLU's zeros, +0 against -0: the first in window order wins).
TEST(VectorLevels, EveryCopyOfTheMaxPoolGivesTheBaselineMaximaAndArgMax) {
  for (const auto& [h, w] : {std::pair<std::int64_t, std::int64_t>{28, 28}, {14, 14}, {5, 35}, {3, 2}, {7, 33}}) {
    const kernels::Pool2dShape g{3, h, w, 2, 2, 0};
    std::vector<float> x = sample(static_cast<std::size_t>(3 * h * w), static_cast<unsigned>(h * w));
    for (std::size_t i = 0; i < x.size(); i += 3) x[i] = x[i] > 0.0f ? x[i] : (i % 2 ? 0.0f : -0.0f);
    expectEveryLevelAgrees(("max pool " + std::to_string(h) + "x" + std::to_string(w)).c_str(), [&] {
      std::vector<float> y(static_cast<std::size_t>(3 * g.outH() * g.outW()));
      std::vector<std::int32_t> arg(y.size());
      kernels::maxPool2dForward(g, x.data(), y.data(), arg.data());
      std::vector<float> at(arg.begin(), arg.end());  // exact: indices < 2^24
      return std::vector<std::vector<float>>{y, at};
    });
  }
}

}  // namespace
}  // namespace hpu::device
