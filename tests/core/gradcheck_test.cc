// The backward of every op in ops.h against central finite differences of
// its forward.
//
// For an op f and a fixed random weight w of f's output shape, the objective
// J(x) = sum(w * f(x)) is differentiated two ways: by the tape (backward of
// ops::sum(ops::mul(f(x), w))) and numerically, element by element, as
// (J(x + h) - J(x - h)) / (x+h - (x-h)) with J summed in double from the
// float32 forward. With h = 1e-2 and O(1) inputs the numeric derivative is
// good to about 1e-4 (float32 rounding of J divided by 2h, plus O(h^2)
// truncation), so the check requires |analytic - numeric| <= 2e-3 + 1e-2 *
// |numeric| unless a case states otherwise. Inputs of non-smooth ops (relu,
// max pooling) are kept farther than h from their kinks.
#include <gtest/gtest.h>
#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>

#include <cmath>
#include <functional>
#include <numeric>

#include "hpu/core/tensor/autograd.h"
#include "hpu/core/ops/ops.h"
#include "test_support.h"

namespace hpu::core {
namespace {

using autograd::Tape;
using autograd::TapeScope;
using testing::labelsOf;
using testing::randomTensor;
using testing::tensorOf;
using testing::testDevice;

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct Tolerance {
  double atol = 2e-3;
  double rtol = 1e-2;
};
constexpr double kStep = 1e-2;

// Compares the tape's gradient of J = sum(w * f(inputs)) with respect to
// every input against central differences; reports up to 5 mismatching
// elements per input.
void checkGradients(const Fn& f, std::vector<Tensor> inputs, Tolerance tol = {}) {
  const Tensor probe = f(inputs);
  Generator g(1234);
  std::vector<float> w(static_cast<std::size_t>(probe.numel()));
  for (float& v : w) v = g.normal();
  const Tensor weight = Tensor::fromHost(testDevice(), probe.shape(), w);

  for (Tensor& x : inputs) {
    x.setRequiresGrad(true);
    x.invalidateGrad();
  }
  Tape tape;
  {
    TapeScope scope(&tape);
    Tensor objective = ops::sum(ops::mul(f(inputs), weight));
    tape.backward(objective);
  }
  EXPECT_EQ(tape.size(), 0u) << "backward() leaves the tape empty";

  auto objective = [&] {
    const Tensor y = f(inputs);
    double j = 0;
    for (std::int64_t i = 0; i < y.numel(); ++i) j += static_cast<double>(w[static_cast<std::size_t>(i)]) * y.data()[i];
    return j;
  };
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    Tensor& x = inputs[k];
    const Tensor grad = x.grad();
    ASSERT_TRUE(grad.defined()) << "input " << k << " received no gradient";
    ASSERT_EQ(grad.shape(), x.shape()) << "input " << k;
    const std::vector<float> analytic = grad.toHost();
    int failures = 0;
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      float& xi = x.data()[i];
      const float original = xi;
      xi = static_cast<float>(original + kStep);
      const double x_plus = xi, j_plus = objective();
      xi = static_cast<float>(original - kStep);
      const double x_minus = xi, j_minus = objective();
      xi = original;
      const double numeric = (j_plus - j_minus) / (x_plus - x_minus);
      const double a = analytic[static_cast<std::size_t>(i)];
      if (std::abs(a - numeric) > tol.atol + tol.rtol * std::abs(numeric) && ++failures <= 5)
        ADD_FAILURE() << "input " << k << " " << x.shape().str() << " element " << i << ": analytic " << a
                      << ", numeric " << numeric;
    }
    EXPECT_EQ(failures, 0) << "input " << k << ": " << failures << " of " << x.numel() << " elements differ";
  }
}

// Normal samples pushed at least `margin` away from zero (relu's kink).
Tensor awayFromZero(const Shape& s, Generator& g, float margin) {
  Tensor t = randomTensor(s, g);
  for (float& v : t.values()) v = v >= 0 ? v + margin : v - margin;
  return t;
}

// A random arrangement of the values 0.05 * (i - n/2): every two differ by
// more than 2h, so max pooling's arg-max is stable under the perturbation.
Tensor distinctValues(const Shape& s, Generator& g) {
  const std::vector<std::int64_t> perm = randomPermutation(s.numel(), g);
  std::vector<float> v(static_cast<std::size_t>(s.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.05f * static_cast<float>(perm[i] - s.numel() / 2);
  return tensorOf(s, v);
}

TEST(GradcheckSelf, DetectsAWrongGradient) {
  // mul(x, x.detach()) has derivative 2x numerically but only x through the
  // tape: the check must report every element.
  Generator g(1);
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD,
                                                         &failures);
    checkGradients([](const std::vector<Tensor>& in) { return ops::mul(in[0], in[0].detach()); },
                   {randomTensor({5}, g)});
  }
  ASSERT_EQ(failures.size(), 6);
  EXPECT_THAT(failures.GetTestPartResult(0).message(), ::testing::HasSubstr("element 0: analytic"));
  EXPECT_THAT(failures.GetTestPartResult(5).message(), ::testing::HasSubstr("5 of 5 elements differ"));
}

TEST(Gradcheck, Linear) {
  Generator g(2);
  checkGradients([](const auto& in) { return ops::linear(in[0], in[1], in[2]); },
                 {randomTensor({3, 5}, g), randomTensor({4, 5}, g), randomTensor({4}, g)});
  // Leading dimensions [2, 3] and no bias.
  checkGradients([](const auto& in) { return ops::linear(in[0], in[1], Tensor()); },
                 {randomTensor({2, 3, 5}, g), randomTensor({4, 5}, g)});
}

TEST(Gradcheck, Matmul) {
  Generator g(3);
  checkGradients([](const auto& in) { return ops::matmul(in[0], in[1]); },
                 {randomTensor({3, 4}, g), randomTensor({4, 2}, g)});
}

TEST(Gradcheck, BatchedMatmulWithTransposesAndBroadcast) {
  Generator g(31);
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "transpose_a=" << ta << " transpose_b=" << tb);
      const ops::MatmulOptions o{ta, tb};
      const Shape a = ta ? Shape{2, 3, 4, 5} : Shape{2, 3, 5, 4};  // op(a): [2, 3, 5, 4]
      // Equal batches, b broadcast over the leading batch dimension, and b
      // shared by every batch (one folded product).
      for (const Shape& b : {tb ? Shape{2, 3, 6, 4} : Shape{2, 3, 4, 6}, tb ? Shape{3, 6, 4} : Shape{3, 4, 6},
                             tb ? Shape{6, 4} : Shape{4, 6}})
        checkGradients([o](const auto& in) { return ops::matmul(in[0], in[1], o); },
                       {randomTensor(a, g), randomTensor(b, g)});
      // a broadcast against a batched b.
      checkGradients([o](const auto& in) { return ops::matmul(in[0], in[1], o); },
                     {randomTensor(ta ? Shape{1, 4, 5} : Shape{1, 5, 4}, g),
                      randomTensor(tb ? Shape{3, 6, 4} : Shape{3, 4, 6}, g)});
    }
}

TEST(Gradcheck, Conv2dStrideOnePaddingZero) {
  Generator g(4);
  checkGradients([](const auto& in) { return ops::conv2d(in[0], in[1], in[2]); },
                 {randomTensor({2, 3, 6, 5}, g), randomTensor({4, 3, 3, 3}, g), randomTensor({4}, g)});
}

TEST(Gradcheck, Conv2dStrideTwoPaddingOneNonSquareKernel) {
  Generator g(5);
  checkGradients([](const auto& in) { return ops::conv2d(in[0], in[1], in[2], {.stride = 2, .padding = 1}); },
                 {randomTensor({2, 2, 7, 6}, g), randomTensor({3, 2, 3, 2}, g), randomTensor({3}, g)});
}

TEST(Gradcheck, Conv2dStrideThreePaddingTwoNoBias) {
  Generator g(6);
  checkGradients([](const auto& in) { return ops::conv2d(in[0], in[1], Tensor(), {.stride = 3, .padding = 2}); },
                 {randomTensor({1, 2, 5, 7}, g), randomTensor({2, 2, 2, 2}, g)});
}

TEST(Gradcheck, Conv2dOneByOne) {
  Generator g(7);
  checkGradients([](const auto& in) { return ops::conv2d(in[0], in[1], in[2]); },
                 {randomTensor({3, 4, 3, 3}, g), randomTensor({2, 4, 1, 1}, g), randomTensor({2}, g)});
}

TEST(Gradcheck, MaxPool2d) {
  Generator g(8);
  checkGradients([](const auto& in) { return ops::maxPool2d(in[0], {.kernel = 2}); },
                 {distinctValues({2, 3, 6, 6}, g)});
  // Overlapping windows with padding on an odd-sized input.
  checkGradients([](const auto& in) { return ops::maxPool2d(in[0], {.kernel = 3, .stride = 2, .padding = 1}); },
                 {distinctValues({1, 2, 7, 5}, g)});
}

// ConvNetClassifier pools before its ReLU: relu(max_pool(x)) must equal
// max_pool(relu(x)) bit for bit, values and input gradients, including
// windows that tie (equal positives, all zeros, all negatives).
TEST(Gradcheck, ReluCommutesWithMaxPool) {
  Generator g(12);
  std::vector<float> v = randomTensor({2, 3, 6, 6}, g).toHost();
  for (std::size_t i = 0; i < v.size(); i += 7) v[i] = std::round(v[i]);  // ties at -1, 0, 1
  for (std::size_t i = 0; i < 12; ++i) v[i] = -0.5f;  // whole windows of negatives
  const Tensor w = randomTensor({2, 3, 3, 3}, g);
  const auto run = [&](bool pool_first) {
    Tensor in = tensorOf({2, 3, 6, 6}, v);
    in.setRequiresGrad(true);
    Tape tape;
    Tensor y;
    {
      TapeScope scope(&tape);
      y = pool_first ? ops::relu(ops::maxPool2d(in, {.kernel = 2})) : ops::maxPool2d(ops::relu(in), {.kernel = 2});
      tape.backward(ops::sum(ops::mul(y, w)));
    }
    return std::pair(y.toHost(), in.grad().toHost());
  };
  const auto [y_pool_first, gx_pool_first] = run(true);
  const auto [y_relu_first, gx_relu_first] = run(false);
  EXPECT_EQ(y_pool_first, y_relu_first);
  EXPECT_EQ(gx_pool_first, gx_relu_first);
  // A quarter of the elements at most win a window; some lose to the ReLU.
  const auto zeros = std::count(gx_pool_first.begin(), gx_pool_first.end(), 0.0f);
  EXPECT_GT(zeros, 216 * 3 / 4);
  EXPECT_LT(zeros, 216);
}

// A fused op's inputs (x, w and, when given, a bias b) and what a run
// of op(x, w, b) gives: its values, the gradients of x, w and b under a
// fixed random weighting of its output, and the ops it records with their
// dtypes.
struct FusedCase {
  Shape x, w;
  std::int64_t bias;  // its size; 0: none
  device::DType dtype;
};
using ThreeInputOp = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>;
std::pair<std::vector<std::vector<float>>, std::vector<std::string>> runTraced(const FusedCase& c,
                                                                               const ThreeInputOp& op,
                                                                               std::uint64_t seed) {
  Generator g(seed);
  Tensor x = Tensor::fromHost(testDevice(), c.x, randomTensor(c.x, g).toHost(), c.dtype);
  Tensor w = Tensor::fromHost(testDevice(), c.w, randomTensor(c.w, g).toHost(), c.dtype);
  Tensor b = c.bias > 0 ? Tensor::fromHost(testDevice(), {c.bias}, randomTensor({c.bias}, g).toHost(), c.dtype)
                        : Tensor();
  for (Tensor* t : {&x, &w, &b})
    if (t->defined()) t->setRequiresGrad(true);
  std::vector<ops::OpTraceEntry> trace;
  Tape tape;
  Tensor y;
  {
    ops::OpTraceScope traced(trace);
    TapeScope scope(&tape);
    y = op(x, w, b);
  }
  const Tensor weight = randomTensor(y.shape(), g);
  {
    TapeScope scope(&tape);
    tape.backward(ops::sum(ops::mul(y, weight)));
  }
  std::vector<std::vector<float>> values{y.toHost(), x.grad().toHost(), w.grad().toHost()};
  if (b.defined()) values.push_back(b.grad().toHost());
  std::vector<std::string> ops_run;
  for (const auto& e : trace) ops_run.push_back(e.op + "/" + std::string(device::dtypeName(e.dtype)));
  return {values, ops_run};
}

// conv2dMaxPool is maxPool2d(conv2d(.)) bit for bit: values, the gradients
// of input, weight and bias, and the ops it records; in float32 (the fused
// kernel, with and without bias, odd output sizes) and bfloat16 (the two ops).
TEST(Gradcheck, Conv2dMaxPoolIsConvolutionThenPooling) {
  const FusedCase cases[] = {{{3, 2, 9, 9}, {4, 2, 3, 3}, 4, device::DType::kFloat32},
                             {{2, 3, 8, 7}, {5, 3, 2, 2}, 0, device::DType::kFloat32},
                             {{2, 2, 6, 6}, {3, 2, 3, 3}, 3, device::DType::kBFloat16}};
  const ops::Conv2dOptions o{.stride = 1, .padding = 1};
  for (const FusedCase& c : cases) {
    SCOPED_TRACE("x " + c.x.str() + " w " + c.w.str());
    const auto fused = runTraced(c, [&](const auto& x, const auto& w, const auto& b) {
      return ops::conv2dMaxPool(x, w, b, o);
    }, 13);
    const auto plain = runTraced(c, [&](const auto& x, const auto& w, const auto& b) {
      return ops::maxPool2d(ops::conv2d(x, w, b, o), {.kernel = 2});
    }, 13);
    EXPECT_EQ(fused, plain);
  }
}

// linearRelu is relu(linear(.)), then dropout when given, bit for bit:
// values, gradients, records, masks; in float32 and bfloat16, with and
// without bias, in both weight layouts, in training and evaluation.
TEST(Gradcheck, LinearReluIsLinearThenReluThenDropout) {
  const std::pair<FusedCase, bool> cases[] = {{{{6, 7}, {5, 7}, 5, device::DType::kFloat32}, false},
                                              {{{2, 3, 7}, {7, 9}, 0, device::DType::kFloat32}, true},
                                              {{{70, 40}, {24, 40}, 24, device::DType::kBFloat16}, false},
                                              {{{37, 33}, {19, 33}, 19, device::DType::kFloat32}, false}};
  for (const auto& [c, in_out] : cases)
    for (const std::optional<std::pair<float, bool>>& drop :  // p, training
         {std::optional<std::pair<float, bool>>{}, std::optional(std::pair(0.3f, true)),
          std::optional(std::pair(0.3f, false))}) {
      SCOPED_TRACE("x " + c.x.str() + " w " + c.w.str() +
                   (drop ? fmt::format(" dropout training {}", drop->second) : ""));
      const ops::LinearOptions o{.weight_in_out = in_out};
      Generator fused_draws(99), plain_draws(99);
      const auto fused = runTraced(c, [&](const auto& x, const auto& w, const auto& b) {
        std::optional<ops::FusedDropout> d;
        if (drop) d = ops::FusedDropout{drop->first, drop->second, &fused_draws};
        return ops::linearRelu(x, w, b, o, d);
      }, 15);
      const auto plain = runTraced(c, [&](const auto& x, const auto& w, const auto& b) {
        const Tensor y = ops::relu(ops::linear(x, w, b, o));
        return drop ? ops::dropout(y, drop->first, drop->second, plain_draws) : y;
      }, 15);
      EXPECT_EQ(fused, plain);
      EXPECT_EQ(fused_draws.next(), plain_draws.next()) << "as many draws";
      const std::vector<float>& y = fused.first[0];
      EXPECT_GT(std::count(y.begin(), y.end(), 0.0f), 0) << "some outputs zeroed";
    }
}

TEST(Gradcheck, AvgPool2d) {
  Generator g(9);
  checkGradients([](const auto& in) { return ops::avgPool2d(in[0], {.kernel = 2}); }, {randomTensor({2, 3, 6, 4}, g)});
  checkGradients([](const auto& in) { return ops::avgPool2d(in[0], {.kernel = 3, .stride = 2, .padding = 1}); },
                 {randomTensor({1, 2, 7, 5}, g)});
  checkGradients([](const auto& in) { return ops::avgPool2d(in[0], {.kernel = 3, .stride = 1}); },
                 {randomTensor({1, 1, 5, 5}, g)});
}

TEST(Gradcheck, Activations) {
  Generator g(10);
  checkGradients([](const auto& in) { return ops::relu(in[0]); }, {awayFromZero({4, 7}, g, 0.05f)});
  checkGradients([](const auto& in) { return ops::gelu(in[0], false); }, {randomTensor({4, 7}, g, 2.0f)});
  checkGradients([](const auto& in) { return ops::gelu(in[0], true); }, {randomTensor({4, 7}, g, 2.0f)});
  checkGradients([](const auto& in) { return ops::tanh(in[0]); }, {randomTensor({4, 7}, g, 1.5f)});
  checkGradients([](const auto& in) { return ops::sigmoid(in[0]); }, {randomTensor({4, 7}, g, 2.0f)});
}

TEST(Gradcheck, DropoutWithAFixedMask) {
  Generator g(11);
  // A fresh generator per forward: every evaluation draws the same mask.
  checkGradients(
      [](const auto& in) {
        Generator rng(77, RandomStream::kDropout);
        return ops::dropout(in[0], 0.4f, true, rng);
      },
      {randomTensor({5, 6}, g)});
}

TEST(Gradcheck, ReshapeAndFlatten) {
  Generator g(12);
  checkGradients([](const auto& in) { return ops::reshape(in[0], {6, 2}); }, {randomTensor({3, 4}, g)});
  checkGradients([](const auto& in) { return ops::flatten(in[0]); }, {randomTensor({2, 3, 2, 2}, g)});
  checkGradients([](const auto& in) { return ops::flatten(in[0], 2); }, {randomTensor({2, 3, 2, 2}, g)});
  // Reshape between two ops, so the reshaped tensor's gradient is consumed.
  checkGradients([](const auto& in) { return ops::tanh(ops::reshape(ops::sigmoid(in[0]), {4, 3})); },
                 {randomTensor({3, 4}, g)});
}

TEST(Gradcheck, LayerNorm) {
  Generator g(13);
  checkGradients([](const auto& in) { return ops::layerNorm(in[0], in[1], in[2]); },
                 {randomTensor({3, 6}, g), randomTensor({6}, g), randomTensor({6}, g)});
  checkGradients([](const auto& in) { return ops::layerNorm(in[0], Tensor(), Tensor()); },
                 {randomTensor({2, 3, 5}, g)});
  // Scale only (as F.layer_norm with bias None).
  checkGradients([](const auto& in) { return ops::layerNorm(in[0], in[1], Tensor()); },
                 {randomTensor({3, 4}, g), randomTensor({4}, g)});
}

TEST(Gradcheck, LayerNormShiftOnly) {
  Generator g(13);
  checkGradients([](const auto& in) { return ops::layerNorm(in[0], Tensor(), in[1]); },
                 {randomTensor({3, 4}, g), randomTensor({4}, g)});
}

TEST(Gradcheck, BatchNorm2dTraining) {
  Generator g(14);
  Tensor running_mean = Tensor::zeros(testDevice(), {2});
  Tensor running_var = Tensor::full(testDevice(), {2}, 1.0f);
  checkGradients(
      [&](const auto& in) { return ops::batchNorm2d(in[0], in[1], in[2], running_mean, running_var, true); },
      {randomTensor({3, 2, 3, 2}, g), randomTensor({2}, g), randomTensor({2}, g)});
  // Without affine parameters.
  checkGradients(
      [&](const auto& in) { return ops::batchNorm2d(in[0], Tensor(), Tensor(), running_mean, running_var, true); },
      {randomTensor({4, 3, 2, 2}, g)});
}

TEST(Gradcheck, BatchNorm2dEval) {
  Generator g(15);
  Tensor running_mean = tensorOf({2}, {0.3f, -0.2f});
  Tensor running_var = tensorOf({2}, {1.5f, 0.7f});
  checkGradients(
      [&](const auto& in) { return ops::batchNorm2d(in[0], in[1], in[2], running_mean, running_var, false); },
      {randomTensor({2, 2, 3, 3}, g), randomTensor({2}, g), randomTensor({2}, g)});
}

TEST(Gradcheck, EmbeddingWithRepeatedIndices) {
  Generator g(16);
  const Tensor indices = Tensor::fromHost(testDevice(), {2, 3}, std::vector<std::int64_t>{4, 0, 4, 2, 4, 1});
  checkGradients([&](const auto& in) { return ops::embedding(indices, in[0]); }, {randomTensor({5, 3}, g)});
}

TEST(Gradcheck, CrossEntropy) {
  Generator g(17);
  const Tensor labels = labelsOf({0, 3, 4, 3});
  checkGradients([&](const auto& in) { return ops::crossEntropy(in[0], labels); }, {randomTensor({4, 5}, g, 2.0f)});
  checkGradients([&](const auto& in) { return ops::crossEntropy(in[0], labels, 0.2f); },
                 {randomTensor({4, 5}, g, 2.0f)});
}

TEST(Gradcheck, MseLoss) {
  Generator g(18);
  checkGradients([](const auto& in) { return ops::mseLoss(in[0], in[1]); },
                 {randomTensor({3, 4}, g), randomTensor({3, 4}, g)});
}

TEST(Gradcheck, Elementwise) {
  Generator g(19);
  checkGradients([](const auto& in) { return ops::add(in[0], in[1]); }, {randomTensor({7}, g), randomTensor({7}, g)});
  checkGradients([](const auto& in) { return ops::sub(in[0], in[1]); }, {randomTensor({7}, g), randomTensor({7}, g)});
  checkGradients([](const auto& in) { return ops::mul(in[0], in[1]); },
                 {randomTensor({2, 3}, g), randomTensor({2, 3}, g)});
  checkGradients([](const auto& in) { return ops::scale(in[0], -2.5f); }, {randomTensor({2, 3}, g)});
}

TEST(Gradcheck, Reductions) {
  Generator g(20);
  checkGradients([](const auto& in) { return ops::sum(in[0]); }, {randomTensor({3, 4}, g)});
  checkGradients([](const auto& in) { return ops::mean(in[0]); }, {randomTensor({3, 4}, g)});
}

TEST(Gradcheck, Softmax) {
  Generator g(21);
  checkGradients([](const auto& in) { return ops::softmax(in[0]); }, {randomTensor({3, 5}, g, 2.0f)});
  checkGradients([](const auto& in) { return ops::softmax(in[0]); }, {randomTensor({2, 2, 3}, g, 2.0f)});
}

TEST(Gradcheck, TensorsUsedTwiceGetTheSumOfBothGradients) {
  Generator g(22);
  // x feeds two branches, and the same tensor is both operands of mul.
  checkGradients([](const auto& in) { return ops::add(ops::mul(in[0], in[0]), ops::tanh(in[0])); },
                 {randomTensor({6}, g)});
  // An intermediate consumed by two ops, and a weight used by two layers.
  checkGradients(
      [](const auto& in) {
        const Tensor h = ops::gelu(ops::linear(in[0], in[1], Tensor()));
        return ops::add(ops::linear(h, in[2], Tensor()), ops::linear(ops::sigmoid(h), in[2], Tensor()));
      },
      {randomTensor({3, 4}, g), randomTensor({5, 4}, g), randomTensor({2, 5}, g)});
}

TEST(Gradcheck, SmallNetworkEndToEnd) {
  Generator g(23);
  const Tensor labels = labelsOf({1, 0, 2});
  Tensor rm = Tensor::zeros(testDevice(), {2}), rv = Tensor::full(testDevice(), {2}, 1.0f);
  checkGradients(
      [&](const auto& in) {
        Tensor h = ops::conv2d(in[0], in[1], in[2], {.stride = 1, .padding = 1});
        h = ops::batchNorm2d(h, Tensor(), Tensor(), rm, rv, true);
        h = ops::avgPool2d(ops::tanh(h), {.kernel = 2});
        h = ops::layerNorm(ops::flatten(h), Tensor(), Tensor());
        return ops::crossEntropy(ops::linear(h, in[3], in[4]), labels, 0.1f);
      },
      {randomTensor({3, 1, 4, 4}, g), randomTensor({2, 1, 3, 3}, g), randomTensor({2}, g), randomTensor({3, 8}, g),
       randomTensor({3}, g)});
}

}  // namespace
}  // namespace hpu::core

// ------------------------------------------------------------------ transformer ops

namespace hpu::core {
namespace {

TEST(Gradcheck, PermuteTransposeAndHeads) {
  Generator g(40);
  checkGradients([](const auto& in) { return ops::permute(in[0], {2, 0, 3, 1}); }, {randomTensor({2, 3, 4, 5}, g)});
  checkGradients([](const auto& in) { return ops::transpose(in[0], -1, 0); }, {randomTensor({3, 2, 4}, g)});
  checkGradients([](const auto& in) { return ops::splitHeads(in[0], 3); }, {randomTensor({2, 4, 6}, g)});
  checkGradients([](const auto& in) { return ops::mergeHeads(in[0]); }, {randomTensor({2, 3, 4, 2}, g)});
}

TEST(Gradcheck, Narrow) {
  Generator g(44);
  // The last position of a sequence (generation's logits), and a middle run of another dimension.
  checkGradients([](const auto& in) { return ops::narrow(in[0], 1, 3, 1); }, {randomTensor({2, 4, 3}, g)});
  checkGradients([](const auto& in) { return ops::narrow(in[0], -1, 1, 2); }, {randomTensor({3, 2, 5}, g)});
  checkGradients([](const auto& in) { return ops::narrow(in[0], 0, 1, 2); }, {randomTensor({4, 3}, g)});
}

TEST(Narrow, CopiesTheRunAndRefusesOneOutOfRange) {
  const Tensor x = tensorOf({2, 3, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  EXPECT_EQ(ops::narrow(x, 1, 2, 1).toHost(), (std::vector<float>{4, 5, 10, 11}));
  EXPECT_EQ(ops::narrow(x, 1, 2, 1).shape(), Shape({2, 1, 2}));
  try {
    ops::narrow(x, 1, 2, 2);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "narrow: positions 2 .. 3 of dimension 1 of [2, 3, 2]");
  }
}

TEST(Gradcheck, SiluAndSwiglu) {
  Generator g(41);
  checkGradients([](const auto& in) { return ops::silu(in[0]); }, {randomTensor({4, 7}, g, 2.0f)});
  checkGradients([](const auto& in) { return ops::swiglu(in[0], in[1]); },
                 {randomTensor({3, 5}, g, 2.0f), randomTensor({3, 5}, g)});
  // One tensor as gate and up: both gradients add up.
  checkGradients([](const auto& in) { return ops::swiglu(in[0], in[0]); }, {randomTensor({3, 5}, g, 2.0f)});
}

// An operand handed over as a temporary lends its memory to the output when
// no backward is recorded and nothing else holds it; the values are the same.
// `moved(kept, temporary)` is the op with its temporary operand,
// `copied(kept, operand)` the same op reading it.
template <class Moved, class Copied>
void checkLendsMemoryOnlyWhenNothingElseNeedsIt(Moved moved, Copied copied) {
  Generator g(45);
  const Tensor kept = randomTensor({3, 5}, g);
  Tensor operand = randomTensor({3, 5}, g, 2.0f);
  const std::vector<float> operand_values = operand.toHost();
  const std::vector<float> expected = copied(kept, operand).toHost();
  EXPECT_EQ(operand.toHost(), operand_values) << "an lvalue is left alone";

  const device::Buffer* memory = operand.storage().get();
  const Tensor y = moved(kept, std::move(operand));
  EXPECT_EQ(y.storage().get(), memory);
  EXPECT_EQ(y.toHost(), expected);

  // Another handle holds the operand: new memory, the operand intact.
  Tensor held = randomTensor({3, 5}, g, 2.0f);
  const Tensor other = held;
  const std::vector<float> held_values = held.toHost();
  const Tensor y2 = moved(kept, std::move(held));
  EXPECT_NE(y2.storage().get(), other.storage().get());
  EXPECT_EQ(other.toHost(), held_values);

  // A backward to record reads the operand: new memory.
  Tensor leaf = randomTensor({3, 5}, g, 2.0f);
  leaf.setRequiresGrad(true);
  autograd::Tape tape;
  autograd::TapeScope scope(&tape);
  Tensor temporary = ops::scale(leaf, 1.0f);
  const device::Buffer* leaf_memory = temporary.storage().get();
  EXPECT_NE(moved(kept, std::move(temporary)).storage().get(), leaf_memory);
}

TEST(Swiglu, ATemporaryGateLendsItsMemoryOnlyWhenNothingElseNeedsIt) {
  checkLendsMemoryOnlyWhenNothingElseNeedsIt(
      [](const Tensor& up, Tensor&& gate) { return ops::swiglu(std::move(gate), up); },
      [](const Tensor& up, const Tensor& gate) { return ops::swiglu(gate, up); });
}

TEST(Add, ATemporaryBranchLendsItsMemoryOnlyWhenNothingElseNeedsIt) {
  checkLendsMemoryOnlyWhenNothingElseNeedsIt(
      [](const Tensor& x, Tensor&& branch) { return ops::add(x, std::move(branch)); },
      [](const Tensor& x, const Tensor& branch) { return ops::add(x, branch); });
}

TEST(Gradcheck, RmsNorm) {
  Generator g(42);
  checkGradients([](const auto& in) { return ops::rmsNorm(in[0], in[1], 1e-5f); },
                 {randomTensor({2, 3, 8}, g), randomTensor({8}, g)});
  checkGradients([](const auto& in) { return ops::rmsNorm(in[0], Tensor(), 1e-6f); }, {randomTensor({4, 6}, g)});
}

TEST(Gradcheck, RotaryEmbedding) {
  Generator g(43);
  const Tensor positions = Tensor::fromHost(testDevice(), {5}, std::vector<std::int64_t>{0, 1, 2, 7, 300});
  checkGradients([&](const auto& in) { return ops::rotaryEmbedding(in[0], positions, 10000.0f); },
                 {randomTensor({2, 3, 5, 8}, g)});
  checkGradients([&](const auto& in) { return ops::rotaryEmbedding(in[0], positions, 500000.0f); },
                 {randomTensor({5, 4}, g)});
}

// Splitting the heads as they rotate: gradients against finite differences,
// and the same bits, forward and backward, as splitHeads then rotaryEmbedding.
TEST(Gradcheck, SplitHeadsRotaryIsSplitThenRotate) {
  Generator g(45);
  const Tensor positions = Tensor::fromHost(testDevice(), {5}, std::vector<std::int64_t>{0, 1, 2, 7, 300});
  checkGradients([&](const auto& in) { return ops::splitHeadsRotary(in[0], 3, positions, 10000.0f); },
                 {randomTensor({2, 5, 3 * 8}, g)});
  const Tensor x = randomTensor({2, 5, 3 * 8}, g), dy = randomTensor({2, 3, 5, 8}, g);
  const auto run = [&](bool fused) {
    Tensor xg = x.detach();
    xg.setRequiresGrad(true);
    autograd::Tape tape;
    std::vector<float> y;
    {
      autograd::TapeScope scope(&tape);
      const Tensor out = fused ? ops::splitHeadsRotary(xg, 3, positions)
                               : ops::rotaryEmbedding(ops::splitHeads(xg, 3), positions);
      EXPECT_EQ(out.shape(), (Shape{2, 3, 5, 8}));
      y = out.toHost();
      tape.backward(ops::sum(ops::mul(out, dy)));
    }
    return std::pair{y, xg.grad().toHost()};
  };
  EXPECT_EQ(run(true), run(false));
}

TEST(Gradcheck, EmbeddingPaddingRowLearnsNothing) {
  Generator g(44);
  const Tensor indices = Tensor::fromHost(testDevice(), {2, 3}, std::vector<std::int64_t>{1, 0, 1, 2, 4, 1});
  Tensor w = randomTensor({5, 3}, g);
  w.setRequiresGrad(true);
  autograd::Tape tape;
  {
    autograd::TapeScope scope(&tape);
    tape.backward(ops::sum(ops::embedding(indices, w, 1)));
  }
  const std::vector<float> grad = w.grad().toHost();
  EXPECT_EQ(std::vector<float>(grad.begin() + 3, grad.begin() + 6), (std::vector<float>{0, 0, 0})) << "padding row 1";
  EXPECT_EQ(std::vector<float>(grad.begin(), grad.begin() + 3), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(std::vector<float>(grad.begin() + 12, grad.end()), (std::vector<float>{1, 1, 1}));
}

TEST(Gradcheck, CrossEntropyOverTokensWithIgnoredTargets) {
  Generator g(45);
  const Tensor labels = Tensor::fromHost(testDevice(), {2, 3}, std::vector<std::int64_t>{0, -100, 4, 3, 3, -100});
  checkGradients([&](const auto& in) { return ops::crossEntropy(in[0], labels, ops::CrossEntropyOptions{}); },
                 {randomTensor({2, 3, 5}, g, 2.0f)});
  checkGradients(
      [&](const auto& in) { return ops::crossEntropy(in[0], labels, ops::CrossEntropyOptions{.label_smoothing = 0.1f}); },
      {randomTensor({2, 3, 5}, g, 2.0f)});
}

// Attention: every variant the models use, fused and eager.
void checkAttention(const Shape& q, const Shape& kv, const ops::AttentionOptions& o, std::uint64_t seed) {
  for (const bool eager : {false, true}) {
    SCOPED_TRACE(eager ? "eager" : "fused");
    Generator g(seed);
    checkGradients(
        [o, eager](const auto& in) {
          ops::AttentionOptions each = o;
          Generator rng(99, RandomStream::kDropout);  // the same masks at every evaluation
          each.rng = &rng;
          each.eager = eager;
          return ops::scaledDotProductAttention(in[0], in[1], in[2], each);
        },
        {randomTensor(q, g), randomTensor(kv, g), randomTensor(kv, g)});
  }
}

// Eager attention is the fused kernel's function: the same outputs and
// gradients (to rounding), over a partly filled cache read through a bucket
// too; and it holds its scores and probabilities in device memory, [B, H, T,
// S] each, where the fused kernel holds none.
TEST(Gradcheck, EagerAttentionComputesWhatTheFusedKernelDoesWithItsScoresInMemory) {
  struct Case {
    Shape q, kv;
    ops::AttentionOptions o;
  };
  const Case cases[] = {
      {{2, 4, 5, 4}, {2, 2, 5, 4}, {.causal = true}},
      {{1, 2, 3, 4}, {1, 2, 7, 4}, {.causal = false}},
      {{1, 4, 6, 4}, {1, 1, 6, 4}, {.causal = true, .sliding_window = 3}},
      // 2 new queries after 3 cached keys, in a cache of 8 rows read through a bucket of 6.
      {{1, 4, 2, 4}, {1, 2, 8, 4}, {.causal = true, .kv_length = 5, .kv_graph_length = 6}},
  };
  auto& memory = testDevice().allocator();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.q.str() + " " + c.kv.str());
    Generator g(53);
    const Tensor q = randomTensor(c.q, g), k = randomTensor(c.kv, g), v = randomTensor(c.kv, g),
                 dy = randomTensor(c.q, g);
    std::vector<std::vector<float>> got[2];
    std::uint64_t held[2];
    for (const bool eager : {false, true}) {
      Tensor qi = q.detach(), ki = k.detach(), vi = v.detach();
      for (Tensor* t : {&qi, &ki, &vi}) t->setRequiresGrad(c.o.kv_length < 0);
      ops::AttentionOptions o = c.o;
      o.eager = eager;
      autograd::Tape tape;
      autograd::TapeScope scope(&tape);
      memory.resetPeakStats();
      const std::uint64_t base = memory.stats().inUse;
      const Tensor y = ops::scaledDotProductAttention(qi, ki, vi, o);
      held[eager] = memory.stats().maxInUse - base;
      got[eager].push_back(y.toHost());
      if (c.o.kv_length >= 0) continue;  // no gradients of a partly filled cache
      tape.backward(y, dy);
      for (const Tensor* t : {&qi, &ki, &vi}) got[eager].push_back(t->grad().toHost());
    }
    ASSERT_EQ(got[0].size(), got[1].size());
    for (std::size_t i = 0; i < got[0].size(); ++i) {
      SCOPED_TRACE(i == 0 ? "output" : "gradient of input " + std::to_string(i - 1));
      for (std::size_t j = 0; j < got[0][i].size(); ++j) EXPECT_NEAR(got[1][i][j], got[0][i][j], 1e-5f) << j;
    }
    const std::uint64_t scores = static_cast<std::uint64_t>(c.q.numel() / c.q[3]) *
                                 static_cast<std::uint64_t>(c.o.kv_graph_length < 0 ? c.kv[2] : c.o.kv_graph_length) *
                                 sizeof(float);
    const std::uint64_t output = static_cast<std::uint64_t>(c.q.numel()) * sizeof(float);
    EXPECT_GE(held[1], 2 * scores + output) << "eager: the scores, the probabilities and the output";
    EXPECT_LT(held[0], scores + output) << "fused: the output and a log-sum-exp per query row";
  }
}

TEST(Gradcheck, AttentionCausalFullAndGroupedQuery) {
  checkAttention({2, 2, 5, 4}, {2, 2, 5, 4}, {.causal = true}, 46);
  checkAttention({1, 2, 4, 3}, {1, 2, 6, 3}, {.causal = false}, 47);
  // 4 query heads over 2 key/value heads.
  checkAttention({2, 4, 5, 4}, {2, 2, 5, 4}, {.causal = true}, 48);
}

TEST(Gradcheck, AttentionOverMoreKeysThanQueriesAndASlidingWindow) {
  // 3 queries after 4 earlier keys (a cached prefix): query i sees keys up to 4 + i.
  checkAttention({1, 2, 3, 4}, {1, 2, 7, 4}, {.causal = true}, 49);
  checkAttention({1, 2, 6, 4}, {1, 1, 6, 4}, {.causal = true, .sliding_window = 3}, 50);
}

TEST(Gradcheck, AttentionWithDropout) {
  checkAttention({1, 2, 5, 4}, {1, 2, 5, 4}, {.causal = true, .dropout_p = 0.3f, .training = true}, 51);
}

TEST(Gradcheck, AttentionOfOneTensorAsQueryKeyAndValue) {
  Generator g(52);
  checkGradients([](const auto& in) { return ops::scaledDotProductAttention(in[0], in[0], in[0], {.causal = true}); },
                 {randomTensor({1, 2, 4, 3}, g)});
}

}  // namespace
}  // namespace hpu::core

namespace hpu::core {
namespace {

TEST(Gradcheck, SoftcapAndSoftCappedAttention) {
  Generator g(60);
  checkGradients([](const auto& in) { return ops::softcap(in[0], 1.5f); }, {randomTensor({3, 7}, g, 2.0f)});
  // Scores large enough for the cap to bend them, on the eager path and as the fused call routes them.
  checkAttention({1, 2, 5, 4}, {1, 1, 5, 4}, {.causal = true, .scale = 2.0f, .softcap = 1.0f}, 61);
  checkAttention({1, 2, 6, 4}, {1, 2, 6, 4}, {.causal = true, .sliding_window = 3, .eager = true, .softcap = 0.7f}, 62);
}

TEST(SoftcappedAttention, IsCapTimesTanhOfTheScaledScoresBeforeTheSoftmax) {
  // One query over two keys: p = softmax(c tanh(s q.k / c)).
  const Tensor q = Tensor::fromHost(testDevice(), {1, 1, 1, 2}, std::vector<float>{1.0f, 2.0f});
  const Tensor k = Tensor::fromHost(testDevice(), {1, 1, 2, 2}, std::vector<float>{3.0f, 0.0f, 0.0f, 1.0f});
  const Tensor v = Tensor::fromHost(testDevice(), {1, 1, 2, 2}, std::vector<float>{1.0f, 0.0f, 0.0f, 1.0f});
  const std::vector<float> y =
      ops::scaledDotProductAttention(q, k, v, {.causal = false, .scale = 0.5f, .softcap = 1.0f}).toHost();
  const double s0 = std::tanh(0.5 * 3.0), s1 = std::tanh(0.5 * 2.0);
  const double p0 = std::exp(s0) / (std::exp(s0) + std::exp(s1));
  EXPECT_NEAR(y[0], p0, 1e-6);
  EXPECT_NEAR(y[1], 1.0 - p0, 1e-6);
}

TEST(Gradcheck, RouterTopKWeightsRenormalised) {
  Generator g(63);
  // Softmax rows of 5 experts; ties are improbable, so the choice is stable under the step.
  const auto topk = [](bool normalize) {
    return [normalize](const std::vector<Tensor>& in) { return ops::routerTopK(ops::softmax(in[0]), 2, normalize).weights; };
  };
  checkGradients(topk(true), {randomTensor({6, 5}, g, 3.0f)});
  checkGradients(topk(false), {randomTensor({6, 5}, g, 3.0f)});
}

TEST(RouterTopK, PicksTheMostProbableExpertsInOrderAndSplitsTiesToTheLowerOne) {
  const Tensor p = Tensor::fromHost(testDevice(), {2, 4}, std::vector<float>{0.1f, 0.4f, 0.2f, 0.3f,  //
                                                                              0.3f, 0.2f, 0.3f, 0.2f});
  const ops::TopKRouting r = ops::routerTopK(p, 2, true);
  EXPECT_THAT(r.experts, ::testing::ElementsAre(1, 3, 0, 2));
  EXPECT_THAT(r.weights.toHost(), ::testing::Pointwise(::testing::FloatNear(1e-6f),
                                                       std::vector<float>{0.4f / 0.7f, 0.3f / 0.7f, 0.5f, 0.5f}));
  EXPECT_THROW(ops::routerTopK(p, 5, true), Error);
}

TEST(Gradcheck, DispatchAndCombineRows) {
  Generator g(64);
  // 4 tokens, 2 choices each, over 3 experts; token 2 goes to experts 0 and 2.
  const std::vector<std::vector<std::int64_t>> rows{{0, 2, 3}, {0, 1, 3}, {1, 2}};
  const std::vector<std::vector<std::int64_t>> slots{{0, 4, 7}, {1, 2, 6}, {3, 5}};
  checkGradients(
      [&](const std::vector<Tensor>& in) {
        std::vector<Tensor> parts = ops::dispatchRows(in[0], rows);
        for (Tensor& p : parts) p = ops::tanh(p);  // an expert that is not linear
        return ops::combineRows(parts, rows, slots, in[1], 4);
      },
      {randomTensor({4, 3}, g), randomTensor({4, 2}, g)});
}

TEST(Gradcheck, ConcatRows) {
  Generator g(65);
  checkGradients([](const std::vector<Tensor>& in) { return ops::concatRows(in); },
                 {randomTensor({2, 3}, g), randomTensor({1, 3}, g), randomTensor({4, 3}, g)});
}

TEST(CombineRows, SumsEachTokensWeightedExpertOutputs) {
  const Tensor y0 = Tensor::fromHost(testDevice(), {2, 2}, std::vector<float>{1, 2, 3, 4});
  const Tensor y1 = Tensor::fromHost(testDevice(), {1, 2}, std::vector<float>{10, 20});
  const Tensor w = Tensor::fromHost(testDevice(), {2, 2}, std::vector<float>{0.25f, 0.75f, 0.5f, 0.5f});
  const std::vector<std::vector<std::int64_t>> rows{{0, 1}, {1}}, slots{{0, 2}, {3}};
  EXPECT_THAT(ops::combineRows(std::vector<Tensor>{y0, y1}, rows, slots, w, 2).toHost(),
              ::testing::ElementsAre(0.25f, 0.5f, 0.5f * 3 + 0.5f * 10, 0.5f * 4 + 0.5f * 20));
}

}  // namespace
}  // namespace hpu::core
