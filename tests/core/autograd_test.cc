// The tape: what is recorded and when, gradient accumulation across uses and
// across backward passes, and the gradient-readiness hook of leaves.
#include <gtest/gtest.h>

#include <cmath>

#include "hpu/core/tensor/autograd.h"
#include "hpu/core/tensor/leaf.h"
#include "hpu/core/ops/ops.h"
#include "test_support.h"

namespace hpu::core {
namespace {

using autograd::Tape;
using autograd::TapeScope;
using testing::randomTensor;
using testing::tensorOf;

Tensor leaf(std::vector<float> v) {
  Tensor t = tensorOf({static_cast<std::int64_t>(v.size())}, v);
  t.setRequiresGrad(true);
  return t;
}

TEST(Tape, NothingIsRecordedOutsideATapeScope) {
  ASSERT_EQ(autograd::currentTape(), nullptr);
  Tensor x = leaf({1.0f, -2.0f, 3.0f});
  const Tensor y = ops::sum(ops::mul(ops::tanh(x), x));
  EXPECT_FALSE(y.requiresGrad());
  EXPECT_FALSE(ops::relu(x).requiresGrad());
  EXPECT_FALSE(x.grad().defined());
}

TEST(Tape, RecordsOneEntryPerOpOnTensorsThatRequireGrad) {
  Tensor x = leaf({1.0f, -2.0f, 3.0f});
  const Tensor constant = tensorOf({3}, {1.0f, 1.0f, 1.0f});
  Tape tape;
  TapeScope scope(&tape);
  EXPECT_EQ(autograd::currentTape(), &tape);
  const Tensor h = ops::tanh(x);
  EXPECT_EQ(tape.size(), 1u);
  EXPECT_TRUE(h.requiresGrad());
  const Tensor c = ops::add(constant, constant);  // no input requires grad
  EXPECT_EQ(tape.size(), 1u);
  EXPECT_FALSE(c.requiresGrad());
  ops::sum(ops::mul(h, c));
  EXPECT_EQ(tape.size(), 3u);
}

TEST(Tape, ANullScopeSuspendsRecordingAndTheOuterTapeComesBack) {
  Tensor x = leaf({0.5f, 1.5f});
  Tape tape;
  TapeScope outer(&tape);
  {
    TapeScope none(nullptr);
    EXPECT_EQ(autograd::currentTape(), nullptr);
    EXPECT_FALSE(ops::sigmoid(x).requiresGrad());
    {
      Tape inner;
      TapeScope nested(&inner);
      ops::sigmoid(x);
      EXPECT_EQ(inner.size(), 1u);
    }
    EXPECT_EQ(autograd::currentTape(), nullptr);
  }
  EXPECT_EQ(autograd::currentTape(), &tape);
  EXPECT_EQ(tape.size(), 0u);
}

TEST(Tape, BackwardClearsTheTapeAndSeedsTheRoot) {
  Tensor x = leaf({1.0f, 2.0f, 3.0f});
  Tape tape;
  {
    TapeScope scope(&tape);
    const Tensor loss = ops::sum(x);
    ASSERT_EQ(tape.size(), 1u);
    tape.backward(loss, 4.0f);  // a loss scale
  }
  EXPECT_EQ(tape.size(), 0u);
  EXPECT_EQ(x.grad().toHost(), (std::vector<float>{4.0f, 4.0f, 4.0f}));
}

TEST(Tape, ATensorUsedTwiceGetsTheSumOfBothGradients) {
  Tensor x = leaf({1.0f, -2.0f, 0.5f});
  Tape tape;
  {
    TapeScope scope(&tape);
    // d/dx sum(x + x) = 2; d/dx sum(x * x) = 2x.
    tape.backward(ops::sum(ops::add(ops::add(x, x), ops::mul(x, x))));
  }
  EXPECT_EQ(x.grad().toHost(), (std::vector<float>{4.0f, -2.0f, 3.0f}));
}

TEST(Tape, LeafGradientsAccumulateAcrossBackwardsUntilInvalidated) {
  Tensor x = leaf({1.0f, 2.0f});
  const Tensor w = tensorOf({2}, {3.0f, -1.0f});
  auto step = [&] {
    Tape tape;
    TapeScope scope(&tape);
    tape.backward(ops::sum(ops::mul(x, w)));
  };
  step();
  EXPECT_EQ(x.grad().toHost(), (std::vector<float>{3.0f, -1.0f}));
  step();  // as torch: .grad accumulates until zero_grad
  EXPECT_EQ(x.grad().toHost(), (std::vector<float>{6.0f, -2.0f}));
  x.invalidateGrad();
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(x.gradValid());
  step();  // overwrites: no zero-fill needed
  EXPECT_EQ(x.grad().toHost(), (std::vector<float>{3.0f, -1.0f}));
}

TEST(Tape, OpsWhoseOutputDoesNotReachTheLossContributeNothing) {
  Tensor x = leaf({1.0f, 2.0f});
  Tensor unused = leaf({5.0f, 6.0f});
  Tape tape;
  {
    TapeScope scope(&tape);
    ops::tanh(unused);  // recorded, but its output has no gradient
    tape.backward(ops::sum(x));
  }
  EXPECT_EQ(x.grad().toHost(), (std::vector<float>{1.0f, 1.0f}));
  EXPECT_FALSE(unused.grad().defined());
}

TEST(Tape, DetachedTensorsReceiveNoGradient) {
  Tensor x = leaf({1.0f, 2.0f});
  Tape tape;
  {
    TapeScope scope(&tape);
    const Tensor d = x.detach();
    EXPECT_FALSE(d.requiresGrad());
    tape.backward(ops::sum(ops::mul(x, d)));  // d/dx through the first operand only
  }
  EXPECT_EQ(x.grad().toHost(), (std::vector<float>{1.0f, 2.0f}));
}

TEST(Tape, GradReadyHookFiresAfterTheLastRecordedUse) {
  Tensor x = leaf({1.0f, 2.0f});
  int fired = 0;
  std::vector<float> grad_when_fired;
  Leaf(x).onGradReady([&] {
    ++fired;
    grad_when_fired = x.grad().toHost();
  });
  Tape tape;
  {
    TapeScope scope(&tape);
    const Tensor a = ops::scale(x, 2.0f), b = ops::scale(x, 3.0f);
    EXPECT_EQ(Leaf(x).pendingUses(), 2);
    tape.backward(ops::sum(ops::add(a, b)));
  }
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(grad_when_fired, (std::vector<float>{5.0f, 5.0f})) << "fired only once both uses were back-propagated";
  EXPECT_EQ(Leaf(x).pendingUses(), 0);
}

}  // namespace
}  // namespace hpu::core

namespace hpu::core {
namespace {

// trainer.detect_anomaly: the first op whose forward output, or whose
// backward's input gradient, holds nan or inf is named.
// Device bytes in use on the test device.
std::uint64_t inUse() { return testing::testDevice().allocator().stats().inUse; }

// The memory tests' tensors: n floats, and scalars.
constexpr std::int64_t kN = 4096;
constexpr std::uint64_t kTensor = kN * sizeof(float), kScalar = sizeof(float);

TEST(Tape, BackwardFunctionsHoldOnlyTheValuesTheirFormulasRead) {
  Tensor x = leaf(std::vector<float>(kN, 0.5f));
  Tape tape;
  TapeScope scope(&tape);
  const std::uint64_t base = inUse();
  {  // add, scale and permute read no values: their outputs go at their last forward use
    const Tensor loss = ops::sum(ops::scale(ops::permute(ops::reshape(ops::add(x, x), {64, 64}), {1, 0}), 2.0f));
    EXPECT_EQ(tape.size(), 5u);
    EXPECT_EQ(inUse() - base, kScalar);
    tape.clear();
  }
  {  // tanh's backward reads its output, GELU's its input (the leaf x)
    const Tensor loss = ops::sum(ops::tanh(ops::gelu(x)));
    EXPECT_EQ(inUse() - base, kTensor + kScalar);
    tape.clear();
  }
  {  // a product reads both operands
    const Tensor square = ops::reshape(x, {64, 64});  // a view of x
    const Tensor loss = ops::sum(ops::matmul(ops::relu(square), ops::scale(square, 3.0f)));
    EXPECT_EQ(tape.size(), 5u);
    EXPECT_EQ(inUse() - base, 2 * kTensor + kScalar) << "relu's output and the scaled x, kept for the product";
    tape.clear();
  }
  EXPECT_EQ(inUse(), base);
}

TEST(Tape, BackwardReleasesEachFunctionOnceItHasRun) {
  Tensor x = leaf(std::vector<float>(kN, 0.5f));
  Tape tape;
  TapeScope scope(&tape);
  Tensor h = x;
  for (int i = 0; i < 8; ++i) h = ops::scale(h, 1.5f);
  const Tensor loss = ops::sum(h);
  h = Tensor();
  const std::uint64_t base = inUse();
  auto& allocator = testing::testDevice().allocator();
  allocator.resetPeakStats();
  tape.backward(loss);
  // The loss's gradient and, at any time, one function's output gradient
  // and its input's: a chain's gradients do not pile up.
  EXPECT_EQ(allocator.stats().maxInUse - base, kScalar + 2 * kTensor);
  EXPECT_EQ(inUse() - base, kScalar + kTensor) << "the loss's and x's gradients";
  EXPECT_FLOAT_EQ(x.grad().values()[0], std::pow(1.5f, 8.0f));
}

TEST(AnomalyDetection, NamesTheFirstOpWithANonFiniteForwardOutput) {
  Tensor x = leaf({1.0f, 2.0f, 3e30f});
  Tape tape;
  autograd::AnomalyDetection detect;
  Tensor loss;
  {
    TapeScope scope(&tape);
    const Tensor h = ops::mul(x, x);  // 9e60: inf, the first non-finite output
    loss = ops::sum(ops::tanh(ops::sub(h, h)));  // inf - inf: nan, after it
  }
  try {
    tape.backward(loss);
    FAIL() << "no anomaly reported";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "trainer.detect_anomaly: 'mul' produced inf values in the forward pass, the first op of the "
                           "step that did");
  }
}

TEST(AnomalyDetection, NamesTheBackwardThatReturnedANonFiniteGradient) {
  // Finite forward; a loss scale of 1e30 overflows in scale's backward (1e30 x 1e30).
  Tensor x = leaf({1e-10f, 2e-10f});
  Tape tape;
  autograd::AnomalyDetection detect;
  Tensor loss;
  {
    TapeScope scope(&tape);
    loss = ops::sum(ops::scale(x, 1e30f));
  }
  try {
    tape.backward(loss, 1e30f);
    FAIL() << "no anomaly reported";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "trainer.detect_anomaly: the backward of 'scale' returned inf values in the gradient of its "
                           "input 0 (its forward's outputs were finite)");
  }
}

TEST(AnomalyDetection, OffChecksNothingAndFiniteRunsPass) {
  Tensor x = leaf({1.0f, 2.0f, 3e30f});
  {
    Tape tape;
    TapeScope scope(&tape);
    const Tensor loss = ops::sum(ops::mul(x, x));
    EXPECT_NO_THROW(tape.backward(loss));  // detection off: inf flows on
  }
  Tensor y = leaf({1.0f, 2.0f});
  Tape tape;
  autograd::AnomalyDetection detect;
  TapeScope scope(&tape);
  const Tensor loss = ops::sum(ops::mul(y, y));
  EXPECT_NO_THROW(tape.backward(loss));
  EXPECT_EQ(y.grad().data()[1], 4.0f);
}

}  // namespace
}  // namespace hpu::core
