// Forward values of the differentiable ops against naive references (double
// accumulation) and a few numbers from PyTorch 1.13, dropout's mask
// semantics, and the messages of shape errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "hpu/core/tensor/autograd.h"
#include "hpu/core/ops/ops.h"
#include "hpu/device/counter_random.h"
#include "hpu/device/threading.h"
#include "test_support.h"

namespace hpu::core {
namespace {

using ::testing::HasSubstr;
using testing::errorOf;
using testing::labelsOf;
using testing::randomTensor;
using testing::tensorOf;
using testing::testDevice;

// Forward values are float32 computations of O(1) numbers: 1e-5 absolute
// unless a case says otherwise.
constexpr double kTol = 1e-5;

void expectValues(const Tensor& t, const std::vector<double>& expected, double tol = kTol) {
  ASSERT_EQ(t.numel(), static_cast<std::int64_t>(expected.size()));
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(t.data()[i], expected[i], tol * std::max(1.0, std::abs(expected[i]))) << "element " << i;
}

double at(const Tensor& t, std::int64_t i) { return t.data()[i]; }

TEST(OpsForward, LinearMatchesNaiveProductWithLeadingDims) {
  Generator g(1);
  const Tensor x = randomTensor({2, 3, 5}, g), w = randomTensor({4, 5}, g), b = randomTensor({4}, g);
  const Tensor y = ops::linear(x, w, b);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 4}));
  std::vector<double> ref;
  for (int r = 0; r < 6; ++r)
    for (int o = 0; o < 4; ++o) {
      double s = at(b, o);
      for (int i = 0; i < 5; ++i) s += at(x, r * 5 + i) * at(w, o * 5 + i);
      ref.push_back(s);
    }
  expectValues(y, ref);
}

TEST(OpsForward, MatmulMatchesNaiveProduct) {
  Generator g(2);
  const Tensor a = randomTensor({3, 4}, g), b = randomTensor({4, 2}, g);
  std::vector<double> ref;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) {
      double s = 0;
      for (int k = 0; k < 4; ++k) s += at(a, i * 4 + k) * at(b, k * 2 + j);
      ref.push_back(s);
    }
  const Tensor y = ops::matmul(a, b);
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  expectValues(y, ref);
}

TEST(OpsForward, BatchedMatmulMatchesNaiveProductsPerBatch) {
  Generator g(21);
  // op(a) [2, 3, 4, 5] with a stored transposed, b [3, 5, 6] broadcast over the leading batch dim.
  const Tensor a = randomTensor({2, 3, 5, 4}, g), b = randomTensor({3, 5, 6}, g);
  const Tensor y = ops::matmul(a, b, {.transpose_a = true});
  EXPECT_EQ(y.shape(), (Shape{2, 3, 4, 6}));
  std::vector<double> ref;
  for (int p = 0; p < 2; ++p)
    for (int q = 0; q < 3; ++q)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 6; ++j) {
          double s = 0;
          for (int k = 0; k < 5; ++k) s += at(a, ((p * 3 + q) * 5 + k) * 4 + i) * at(b, (q * 5 + k) * 6 + j);
          ref.push_back(s);
        }
  expectValues(y, ref);
}

TEST(OpsForward, BatchedMatmulWithTransposedBEqualsTheProductWithBTransposedByHand) {
  Generator g(22);
  const Tensor a = randomTensor({4, 3, 5}, g), bt = randomTensor({6, 5}, g);
  std::vector<float> b(30);
  for (int i = 0; i < 6; ++i)
    for (int k = 0; k < 5; ++k) b[static_cast<std::size_t>(k * 6 + i)] = bt.data()[i * 5 + k];
  EXPECT_EQ(ops::matmul(a, bt, {.transpose_b = true}).toHost(), ops::matmul(a, tensorOf({5, 6}, b)).toHost());
}

// Direct convolution: out[n][k][oy][ox] = b[k] + sum x[n][c][oy*s+i-p][ox*s+j-p] w[k][c][i][j].
std::vector<double> naiveConv(const Tensor& x, const Tensor& w, const Tensor& b, int stride, int pad, Shape& out) {
  const auto N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const auto K = w.size(0), R = w.size(2), S = w.size(3);
  const auto OH = (H + 2 * pad - R) / stride + 1, OW = (W + 2 * pad - S) / stride + 1;
  out = Shape{N, K, OH, OW};
  std::vector<double> ref;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t oy = 0; oy < OH; ++oy)
        for (std::int64_t ox = 0; ox < OW; ++ox) {
          double s = b.defined() ? at(b, k) : 0.0;
          for (std::int64_t c = 0; c < C; ++c)
            for (std::int64_t i = 0; i < R; ++i)
              for (std::int64_t j = 0; j < S; ++j) {
                const auto iy = oy * stride + i - pad, ix = ox * stride + j - pad;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                s += at(x, ((n * C + c) * H + iy) * W + ix) * at(w, ((k * C + c) * R + i) * S + j);
              }
          ref.push_back(s);
        }
  return ref;
}

TEST(OpsForward, Conv2dMatchesDirectConvolution) {
  struct Case {
    Shape x, w;
    int stride, pad;
    bool bias;
  };
  const Case cases[] = {
      {{2, 3, 6, 5}, {4, 3, 3, 3}, 1, 0, true},   {{2, 2, 7, 6}, {3, 2, 3, 2}, 2, 1, true},
      {{1, 2, 5, 7}, {2, 2, 2, 2}, 3, 2, false},  {{3, 4, 3, 3}, {2, 4, 1, 1}, 1, 0, true},
      {{2, 1, 28, 28}, {8, 1, 5, 5}, 1, 2, true}, {{1, 3, 9, 9}, {2, 3, 3, 3}, 2, 0, true},
  };
  Generator g(3);
  for (const Case& c : cases) {
    SCOPED_TRACE("x " + c.x.str() + " w " + c.w.str() + " stride " + std::to_string(c.stride) + " padding " +
                 std::to_string(c.pad));
    const Tensor x = randomTensor(c.x, g), w = randomTensor(c.w, g);
    const Tensor b = c.bias ? randomTensor({c.w[0]}, g) : Tensor();
    Shape out;
    const std::vector<double> ref = naiveConv(x, w, b, c.stride, c.pad, out);
    const Tensor y = ops::conv2d(x, w, b, {.stride = c.stride, .padding = c.pad});
    EXPECT_EQ(y.shape(), out);
    expectValues(y, ref, 1e-5);
  }
}

// Pooling over windows clipped to the input; average divides by the full
// window (count_include_pad=True, torch's default).
std::vector<double> naivePool(const Tensor& x, int k, int stride, int pad, bool max, Shape& out) {
  const auto P = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
  const auto OH = (H + 2 * pad - k) / stride + 1, OW = (W + 2 * pad - k) / stride + 1;
  out = Shape{x.size(0), x.size(1), OH, OW};
  std::vector<double> ref;
  for (std::int64_t p = 0; p < P; ++p)
    for (std::int64_t oy = 0; oy < OH; ++oy)
      for (std::int64_t ox = 0; ox < OW; ++ox) {
        double best = -INFINITY, sum = 0;
        for (int i = 0; i < k; ++i)
          for (int j = 0; j < k; ++j) {
            const auto iy = oy * stride + i - pad, ix = ox * stride + j - pad;
            if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
            const double v = at(x, (p * H + iy) * W + ix);
            best = std::max(best, v);
            sum += v;
          }
        ref.push_back(max ? best : sum / (k * k));
      }
  return ref;
}

TEST(OpsForward, PoolingMatchesNaiveWindows) {
  struct Case {
    Shape x;
    int k, stride, pad;
  };
  const Case cases[] = {{{2, 3, 6, 6}, 2, 2, 0}, {{1, 2, 7, 5}, 3, 2, 1}, {{1, 1, 5, 5}, 3, 1, 0}, {{2, 2, 9, 7}, 2, 3, 1}};
  Generator g(4);
  for (const Case& c : cases) {
    SCOPED_TRACE("x " + c.x.str() + " kernel " + std::to_string(c.k) + " stride " + std::to_string(c.stride) +
                 " padding " + std::to_string(c.pad));
    const Tensor x = randomTensor(c.x, g);
    const ops::Pool2dOptions o{.kernel = c.k, .stride = c.stride, .padding = c.pad};
    Shape out;
    const std::vector<double> max_ref = naivePool(x, c.k, c.stride, c.pad, true, out);
    const Tensor mx = ops::maxPool2d(x, o);
    EXPECT_EQ(mx.shape(), out);
    expectValues(mx, max_ref);
    const std::vector<double> avg_ref = naivePool(x, c.k, c.stride, c.pad, false, out);
    const Tensor av = ops::avgPool2d(x, o);
    EXPECT_EQ(av.shape(), out);
    expectValues(av, avg_ref);
  }
  // stride 0 means stride = kernel.
  const Tensor x = randomTensor({1, 1, 4, 4}, g);
  EXPECT_EQ(ops::maxPool2d(x, {.kernel = 2, .stride = 0}).shape(), (Shape{1, 1, 2, 2}));
}

TEST(OpsForward, ActivationsMatchTorch) {
  const Tensor x = tensorOf({7}, {-3.0f, -1.0f, -0.25f, 0.0f, 0.5f, 1.0f, 2.5f});
  // torch.nn.functional.gelu(x) and gelu(x, approximate='tanh'), torch 1.13.
  expectValues(ops::gelu(x, false), {-0.004049867391586304, -0.1586552858352661, -0.10032343119382858, 0.0,
                                     0.3457311987876892, 0.8413447141647339, 2.48447585105896});
  expectValues(ops::gelu(x, true), {-0.0036374330520629883, -0.15880799293518066, -0.10032464563846588, 0.0,
                                    0.3457140028476715, 0.8411920070648193, 2.4849157333374023});
  std::vector<double> relu, tanh_ref, sigmoid;
  for (float v : x.values()) {
    relu.push_back(std::max(0.0f, v));
    tanh_ref.push_back(std::tanh(static_cast<double>(v)));
    sigmoid.push_back(1.0 / (1.0 + std::exp(-static_cast<double>(v))));
  }
  expectValues(ops::relu(x), relu, 0.0);
  expectValues(ops::tanh(x), tanh_ref);
  expectValues(ops::sigmoid(x), sigmoid);
}

// The mask takes one next() per call, the key of a counter-based stream:
// element i is dropped when its 32-bit half of counterDraw(key, i / 2) (low
// for even i) is below p * 2^32. Any thread count draws the same mask.
TEST(OpsForward, DropoutZeroesWithItsKeysCounterDrawsOnAnyThreadCountAndScalesTheRest) {
  const float p = 0.3f;
  const std::int64_t n = 100001;  // odd: the last element takes half a draw
  const Tensor x = Tensor::full(testDevice(), {n}, 2.0f);
  Generator rng(5, RandomStream::kDropout);
  const Tensor y = ops::dropout(x, p, true, rng);
  Generator replay(5, RandomStream::kDropout);
  const std::uint64_t key = replay.next();
  EXPECT_EQ(rng.state().s[0], replay.state().s[0]) << "one draw per call";
  const auto threshold = static_cast<std::uint64_t>(static_cast<double>(p) * 4294967296.0);
  std::int64_t zeros = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint64_t r = device::counterDraw(key, static_cast<std::uint64_t>(i / 2));
    const bool dropped = (i % 2 == 0 ? r & 0xffffffffu : r >> 32) < threshold;
    zeros += dropped;
    ASSERT_EQ(y.data()[i], dropped ? 0.0f : 2.0f / (1.0f - p)) << "element " << i;
  }
  // Binomial(100001, 0.3): 30000 +- 145; a fixed seed, so this is a sanity bound.
  EXPECT_GT(zeros, 29400);
  EXPECT_LT(zeros, 30600);
  // The same mask on the team, whatever the cost model would choose.
  device::setAlwaysParallelForTesting(true);
  Generator again(5, RandomStream::kDropout);
  const Tensor shared = ops::dropout(x, p, true, again);
  device::setAlwaysParallelForTesting(false);
  EXPECT_EQ(shared.toHost(), y.toHost());
  const Tensor y2 = ops::dropout(x, p, true, rng);
  EXPECT_NE(y.toHost(), y2.toHost());
}

TEST(OpsForward, DropoutIsTheIdentityInEvalAndWithZeroProbability) {
  Generator g(6);
  const Tensor x = randomTensor({4, 5}, g);
  Generator rng(7);
  const Generator::State before = rng.state();
  EXPECT_TRUE(ops::dropout(x, 0.5f, false, rng).sameAs(x));
  EXPECT_TRUE(ops::dropout(x, 0.0f, true, rng).sameAs(x));
  EXPECT_EQ(rng.state().s[0], before.s[0]) << "eval draws no random numbers";
}

TEST(OpsForward, ReshapeAndFlattenKeepTheData) {
  Generator g(7);
  const Tensor x = randomTensor({2, 3, 2, 2}, g);
  EXPECT_EQ(ops::flatten(x).shape(), (Shape{2, 12}));
  EXPECT_EQ(ops::flatten(x, 2).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(ops::flatten(x, 0).shape(), (Shape{24}));
  const Tensor r = ops::reshape(x, {4, 6});
  EXPECT_EQ(r.shape(), (Shape{4, 6}));
  EXPECT_EQ(r.toHost(), x.toHost());
  EXPECT_EQ(errorOf([&] { ops::reshape(x, {5, 5}); }), "reshape: [2, 3, 2, 2] to [5, 5]");
}

TEST(OpsForward, LayerNormMatchesNaiveWithAndWithoutAffineParts) {
  Generator g(8);
  const Tensor x = randomTensor({3, 6}, g), w = randomTensor({6}, g), b = randomTensor({6}, g);
  std::vector<double> plain, affine, scaled;
  for (int r = 0; r < 3; ++r) {
    double m = 0, v = 0;
    for (int i = 0; i < 6; ++i) m += at(x, r * 6 + i) / 6;
    for (int i = 0; i < 6; ++i) v += (at(x, r * 6 + i) - m) * (at(x, r * 6 + i) - m) / 6;
    for (int i = 0; i < 6; ++i) {
      const double n = (at(x, r * 6 + i) - m) / std::sqrt(v + 1e-5);
      plain.push_back(n);
      affine.push_back(n * at(w, i) + at(b, i));
      scaled.push_back(n * at(w, i));
    }
  }
  expectValues(ops::layerNorm(x, Tensor(), Tensor()), plain);
  expectValues(ops::layerNorm(x, w, b), affine);
  expectValues(ops::layerNorm(x, w, Tensor()), scaled);
}

TEST(OpsForward, LayerNormShiftOnly) {
  Generator g(8);
  const Tensor x = randomTensor({2, 4}, g), b = randomTensor({4}, g);
  const Tensor plain = ops::layerNorm(x, Tensor(), Tensor());
  std::vector<double> shifted;
  for (int i = 0; i < 8; ++i) shifted.push_back(at(plain, i) + at(b, i % 4));
  expectValues(ops::layerNorm(x, Tensor(), b), shifted);
}

TEST(OpsForward, BatchNorm2dTrainingNormalisesPerChannelAndUpdatesRunningStatsAsTorch) {
  Generator g(9);
  const Tensor x = randomTensor({3, 2, 2, 3}, g, 2.0f);
  const Tensor w = tensorOf({2}, {1.5f, -0.5f}), b = tensorOf({2}, {0.25f, 1.0f});
  Tensor rm = tensorOf({2}, {0.5f, -1.0f}), rv = tensorOf({2}, {2.0f, 0.5f});
  const float momentum = 0.2f;
  const Tensor y = ops::batchNorm2d(x, w, b, rm, rv, true, momentum);
  std::vector<double> ref(static_cast<std::size_t>(x.numel()));
  for (int c = 0; c < 2; ++c) {
    double m = 0, sq = 0;
    const int count = 3 * 6;
    for (int n = 0; n < 3; ++n)
      for (int j = 0; j < 6; ++j) m += at(x, (n * 2 + c) * 6 + j) / count;
    for (int n = 0; n < 3; ++n)
      for (int j = 0; j < 6; ++j) sq += std::pow(at(x, (n * 2 + c) * 6 + j) - m, 2);
    for (int n = 0; n < 3; ++n)
      for (int j = 0; j < 6; ++j) {
        const int i = (n * 2 + c) * 6 + j;
        ref[static_cast<std::size_t>(i)] = (at(x, i) - m) / std::sqrt(sq / count + 1e-5) * at(w, c) + at(b, c);
      }
    // torch: running = (1 - momentum) * running + momentum * batch, with the
    // unbiased (n - 1) variance.
    const double old_mean = c == 0 ? 0.5 : -1.0, old_var = c == 0 ? 2.0 : 0.5;
    EXPECT_NEAR(at(rm, c), (1 - momentum) * old_mean + momentum * m, 1e-6) << "channel " << c;
    EXPECT_NEAR(at(rv, c), (1 - momentum) * old_var + momentum * sq / (count - 1), 1e-6) << "channel " << c;
  }
  expectValues(y, ref);
}

TEST(OpsForward, BatchNorm2dEvalUsesRunningStatsAndLeavesThem) {
  Generator g(10);
  const Tensor x = randomTensor({2, 2, 2, 2}, g);
  const Tensor w = tensorOf({2}, {2.0f, 0.5f}), b = tensorOf({2}, {0.0f, -1.0f});
  Tensor rm = tensorOf({2}, {0.3f, -0.2f}), rv = tensorOf({2}, {1.5f, 0.7f});
  const Tensor y = ops::batchNorm2d(x, w, b, rm, rv, false);
  std::vector<double> ref;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 2; ++c)
      for (int j = 0; j < 4; ++j)
        ref.push_back((at(x, (n * 2 + c) * 4 + j) - at(rm, c)) / std::sqrt(at(rv, c) + 1e-5) * at(w, c) + at(b, c));
  expectValues(y, ref);
  EXPECT_EQ(rm.toHost(), (std::vector<float>{0.3f, -0.2f}));
  EXPECT_EQ(rv.toHost(), (std::vector<float>{1.5f, 0.7f}));
}

TEST(OpsForward, EmbeddingGathersRows) {
  Generator g(11);
  const Tensor weight = randomTensor({5, 3}, g);
  const Tensor idx = Tensor::fromHost(testDevice(), {2, 2}, std::vector<std::int64_t>{4, 0, 4, 2});
  const Tensor y = ops::embedding(idx, weight);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 3}));
  std::vector<double> ref;
  for (std::int64_t r : {4, 0, 4, 2})
    for (int j = 0; j < 3; ++j) ref.push_back(at(weight, r * 3 + j));
  expectValues(y, ref, 0.0);
  const Tensor bad = labelsOf({1, 5});
  EXPECT_EQ(errorOf([&] { ops::embedding(bad, weight); }), "embedding: index 5 out of range for 5 embeddings");
}

TEST(OpsForward, CrossEntropyMatchesTorchWithAndWithoutLabelSmoothing) {
  const Tensor logits =
      tensorOf({3, 4}, {1.0f, 2.0f, 3.0f, -1.0f, 0.5f, -1.0f, 2.0f, 0.25f, -2.0f, 0.0f, 0.5f, 4.0f});
  const Tensor labels = labelsOf({2, 0, 3});
  // torch.nn.functional.cross_entropy(logits, labels, label_smoothing=s), torch 1.13.
  EXPECT_NEAR(ops::crossEntropy(logits, labels).item(), 0.7795767188072205, 1e-6);
  EXPECT_NEAR(ops::crossEntropy(logits, labels, 0.1f).item(), 0.9524933695793152, 1e-6);
  EXPECT_NEAR(ops::crossEntropy(logits, labels, 1.0f).item(), 2.5087432861328125, 1e-6);
  EXPECT_EQ(ops::crossEntropy(logits, labels).shape(), Shape{});
  EXPECT_EQ(errorOf([&] { ops::crossEntropy(logits, labelsOf({2, 4, 0})); }),
            "cross_entropy: label 4 of sample 1 is outside the 4 classes");
  EXPECT_EQ(errorOf([&] { ops::crossEntropy(logits, labelsOf({2, 0})); }),
            "cross_entropy: expects logits [..., C] and int64 labels [...] (one per row), got [3, 4] and [2]");
}

TEST(OpsForward, CrossEntropyIsStableForLargeLogits) {
  const Tensor logits = tensorOf({1, 3}, {1000.0f, 0.0f, -1000.0f});
  EXPECT_NEAR(ops::crossEntropy(logits, labelsOf({0})).item(), 0.0, 1e-6);
  EXPECT_NEAR(ops::crossEntropy(logits, labelsOf({1})).item(), 1000.0, 1e-3);
}

TEST(OpsForward, MseSoftmaxAndReductionsMatchNaive) {
  Generator g(12);
  const Tensor a = randomTensor({3, 4}, g), b = randomTensor({3, 4}, g);
  double mse = 0, total = 0;
  for (int i = 0; i < 12; ++i) {
    mse += std::pow(at(a, i) - at(b, i), 2) / 12;
    total += at(a, i);
  }
  EXPECT_NEAR(ops::mseLoss(a, b).item(), mse, 1e-6);
  EXPECT_NEAR(ops::sum(a).item(), total, 1e-5);
  EXPECT_NEAR(ops::mean(a).item(), total / 12, 1e-6);

  std::vector<double> add, sub, mul, scaled, soft;
  for (int i = 0; i < 12; ++i) {
    add.push_back(at(a, i) + at(b, i));
    sub.push_back(at(a, i) - at(b, i));
    mul.push_back(at(a, i) * at(b, i));
    scaled.push_back(at(a, i) * -2.5);
  }
  for (int r = 0; r < 3; ++r) {
    double z = 0;
    for (int j = 0; j < 4; ++j) z += std::exp(at(a, r * 4 + j));
    for (int j = 0; j < 4; ++j) soft.push_back(std::exp(at(a, r * 4 + j)) / z);
  }
  expectValues(ops::add(a, b), add);
  expectValues(ops::sub(a, b), sub);
  expectValues(ops::mul(a, b), mul);
  expectValues(ops::scale(a, -2.5f), scaled);
  expectValues(ops::softmax(a), soft);
  EXPECT_EQ(errorOf([&] { ops::add(a, randomTensor({4, 3}, g)); }),
            "add: shapes [3, 4] and [4, 3] differ (no broadcasting)");
  EXPECT_EQ(errorOf([&] { ops::mseLoss(a, randomTensor({12}, g)); }), "mse_loss: shapes [3, 4] and [12] differ");
}

TEST(OpsForward, CountCorrectCountsArgMaxHits) {
  const Tensor logits = tensorOf({3, 3}, {0.1f, 0.9f, 0.0f, 2.0f, 1.0f, 3.0f, -1.0f, -2.0f, -3.0f});
  EXPECT_EQ(ops::countCorrect(logits, labelsOf({1, 2, 0})), 3);
  EXPECT_EQ(ops::countCorrect(logits, labelsOf({0, 2, 1})), 1);
}

TEST(OpsForward, ShapeErrorsNameTheOpAndTheShapes) {
  Generator g(13);
  const Tensor x = randomTensor({3, 5}, g);
  EXPECT_EQ(errorOf([&] { ops::linear(x, randomTensor({4, 6}, g), Tensor()); }),
            "linear: input [3, 5] does not match weight [4, 6]");
  EXPECT_EQ(errorOf([&] { ops::matmul(x, randomTensor({4, 2}, g)); }), "matmul: shapes [3, 5] and [4, 2] do not chain");
  EXPECT_EQ(ops::matmul(x, randomTensor({4, 5}, g), {.transpose_b = true}).shape(), (Shape{3, 4}));
  EXPECT_EQ(errorOf([&] { ops::matmul(x, randomTensor({5, 4}, g), {.transpose_b = true}); }),
            "matmul: shapes [3, 5] and [5, 4] do not chain (transpose_a=false, transpose_b=true)");
  EXPECT_EQ(errorOf([&] { ops::matmul(randomTensor({2, 3, 5}, g), randomTensor({4, 5, 2}, g)); }),
            "matmul: batch dimensions of [2, 3, 5] and [4, 5, 2] do not broadcast");
  EXPECT_EQ(errorOf([&] { ops::matmul(randomTensor({5}, g), randomTensor({5, 2}, g)); }),
            "matmul: expects matrices (2 or more dimensions), got [5] and [5, 2]");
  const Tensor img = randomTensor({1, 2, 3, 3}, g);
  EXPECT_EQ(errorOf([&] { ops::conv2d(img, randomTensor({1, 3, 3, 3}, g), Tensor()); }),
            "conv2d: input [1, 2, 3, 3] does not match weight [1, 3, 3, 3]");
  EXPECT_EQ(errorOf([&] { ops::conv2d(img, randomTensor({1, 2, 5, 5}, g), Tensor()); }),
            "conv2d: kernel larger than the padded input");
  EXPECT_EQ(errorOf([&] { ops::maxPool2d(x, {}); }), "max_pool2d: expects [N, C, H, W], got [3, 5]");
  // A kernel larger than the input by less than the stride used to slip
  // through the output-size division (truncation toward zero).
  EXPECT_EQ(errorOf([&] { ops::avgPool2d(img, {.kernel = 4}); }), "avg_pool2d: window larger than the padded input");
  EXPECT_EQ(errorOf([&] { ops::maxPool2d(img, {.kernel = 4, .stride = 2}); }),
            "max_pool2d: window larger than the padded input");
  EXPECT_EQ(errorOf([&] { ops::conv2d(img, randomTensor({1, 2, 4, 4}, g), Tensor(), {.stride = 2}); }),
            "conv2d: kernel larger than the padded input");
  // Windows made only of padding (no arg-max) are refused, as torch does.
  EXPECT_EQ(errorOf([&] { ops::maxPool2d(img, {.kernel = 2, .padding = 2}); }),
            "max_pool2d: kernel 2, stride 0, padding 2: expected kernel >= 1, stride >= 0 and padding at most half "
            "the kernel");
  EXPECT_EQ(errorOf([&] { ops::conv2d(img, randomTensor({1, 2, 1, 1}, g), Tensor(), {.stride = 0}); }),
            "conv2d: stride 0 and padding 0: expected stride >= 1, padding >= 0");
  EXPECT_EQ(errorOf([&] { ops::embedding(x, x); }), "embedding: expects int64 indices and a [num, dim] weight");
  EXPECT_EQ(errorOf([&] {
              Tensor rm = Tensor::zeros(testDevice(), {2}), rv = Tensor::zeros(testDevice(), {2});
              ops::batchNorm2d(x, Tensor(), Tensor(), rm, rv, true);
            }),
            "batch_norm2d: expects [N, C, H, W], got [3, 5]");
}

}  // namespace
}  // namespace hpu::core
