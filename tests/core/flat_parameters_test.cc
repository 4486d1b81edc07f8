// FlatParameters: parameters and gradients become views into contiguous
// buckets (reverse registration order, capped size), gradient validity
// across steps, and the per-bucket readiness callback DDP overlaps on.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "hpu/core/nn/flat_parameters.h"
#include "hpu/core/tensor/autograd.h"
#include "hpu/core/ops/ops.h"
#include "test_support.h"

namespace hpu::core::nn {
namespace {

using autograd::Tape;
using autograd::TapeScope;
using testing::tensorOf;
using testing::testDevice;

// A module holding the given parameters (no forward: tests compute with them).
class Holder : public Module {
 public:
  std::string typeName() const override { return "Holder"; }
  Tensor add(const std::string& name, const Shape& shape, float first) {
    std::vector<float> v(static_cast<std::size_t>(shape.numel()));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = first + static_cast<float>(i);
    return registerParameter(name, tensorOf(shape, v));
  }
};

// Registration order a[3], b[2,2], child.c[5], child.d[2].
std::shared_ptr<Holder> fourParameters() {
  auto m = std::make_shared<Holder>();
  m->add("a", {3}, 100);
  m->add("b", {2, 2}, 200);
  auto child = m->registerModule("child", std::make_shared<Holder>());
  child->add("c", {5}, 300);
  child->add("d", {2}, 400);
  return m;
}

std::vector<std::vector<std::string>> layout(const FlatParameters& flat) {
  std::vector<std::vector<std::string>> out;
  for (const auto& b : flat.buckets()) {
    out.emplace_back();
    for (const auto& m : b.members) out.back().push_back(m.name);
  }
  return out;
}

TEST(FlatParameters, ParametersBecomeViewsIntoBucketsInReverseRegistrationOrder) {
  auto m = fourParameters();
  std::map<std::string, std::vector<float>> before;
  for (const auto& p : m->namedParameters()) before[p.name] = p.tensor.toHost();

  FlatParameters flat(*m, testDevice(), 7 * sizeof(float));
  EXPECT_EQ(layout(flat), (std::vector<std::vector<std::string>>{{"child.d", "child.c"}, {"b", "a"}}));
  EXPECT_EQ(flat.numel(), 14);
  const std::vector<std::int64_t> offsets[] = {{0, 2}, {0, 4}};
  for (std::size_t bi = 0; bi < 2; ++bi) {
    ParamBucket& bucket = flat.buckets()[bi];
    EXPECT_EQ(bucket.numel, 7);
    EXPECT_EQ(bucket.offsets, offsets[bi]);
  }
  // The module's own handles now point into the buckets, values preserved.
  for (const auto& p : m->namedParameters()) {
    SCOPED_TRACE(p.name);
    EXPECT_EQ(p.tensor.toHost(), before[p.name]);
    bool found = false;
    for (auto& bucket : flat.buckets())
      for (std::size_t i = 0; i < bucket.members.size(); ++i)
        if (bucket.members[i].name == p.name) {
          found = true;
          EXPECT_EQ(p.tensor.storage(), bucket.values);
          EXPECT_EQ(p.tensor.storageOffset(), bucket.offsets[i]);
          EXPECT_TRUE(p.tensor.sameAs(bucket.members[i].tensor));
        }
    EXPECT_TRUE(found);
  }
  // Writing the bucket writes the parameters: one storage.
  EXPECT_EQ(std::vector<float>(flat.buckets()[0].valueSpan().begin(), flat.buckets()[0].valueSpan().end()),
            (std::vector<float>{400, 401, 300, 301, 302, 303, 304}));
  flat.buckets()[1].valueSpan()[4] = -1.0f;
  EXPECT_EQ(m->namedParameters()[0].tensor.data()[0], -1.0f) << "a[0] sits at offset 4 of bucket 1";
}

TEST(FlatParameters, BucketCapIsRespectedAndALargerParameterGetsItsOwnBucket) {
  const std::pair<std::int64_t, std::vector<std::vector<std::string>>> cases[] = {
      {4, {{"child.d"}, {"child.c"}, {"b"}, {"a"}}},  // 1 float: every parameter is larger
      {6 * 4, {{"child.d"}, {"child.c"}, {"b"}, {"a"}}},
      {7 * 4, {{"child.d", "child.c"}, {"b", "a"}}},
      {11 * 4, {{"child.d", "child.c", "b"}, {"a"}}},
      {1 << 20, {{"child.d", "child.c", "b", "a"}}},
  };
  for (const auto& [cap, expected] : cases) {
    SCOPED_TRACE("cap " + std::to_string(cap) + " bytes");
    auto m = fourParameters();
    FlatParameters flat(*m, testDevice(), cap);
    EXPECT_EQ(layout(flat), expected);
    for (const auto& b : flat.buckets())
      EXPECT_TRUE(b.numel * 4 <= cap || b.members.size() == 1) << b.numel << " floats";
  }
}

// J = sum over parameters of sum(p * w_p): the gradient of p is w_p.
void backwardWithWeights(const Module& m, const std::vector<std::string>& used, float scale = 1.0f) {
  Tape tape;
  TapeScope scope(&tape);
  Tensor total;
  for (const auto& p : m.namedParameters()) {
    if (std::find(used.begin(), used.end(), p.name) == used.end()) continue;
    const Tensor w = Tensor::full(testDevice(), p.tensor.shape(), scale * static_cast<float>(p.name.size()));
    const Tensor term = ops::sum(ops::mul(p.tensor, w));
    total = total.defined() ? ops::add(total, term) : term;
  }
  tape.backward(total);
}

TEST(FlatParameters, GradientsLandInTheGradBucket) {
  auto m = fourParameters();
  FlatParameters flat(*m, testDevice(), 7 * sizeof(float));
  for (const auto& p : m->namedParameters()) EXPECT_FALSE(p.tensor.grad().defined()) << "no gradient before backward";
  backwardWithWeights(*m, {"a", "b", "child.c", "child.d"});
  for (auto& bucket : flat.buckets())
    for (std::size_t i = 0; i < bucket.members.size(); ++i) {
      const Tensor g = bucket.members[i].tensor.grad();
      ASSERT_TRUE(g.defined());
      EXPECT_EQ(g.storage(), bucket.grads);
      EXPECT_EQ(g.storageOffset(), bucket.offsets[i]);
    }
  // Weight = length of the name: d and c have 7, b and a have 1.
  EXPECT_EQ(std::vector<float>(flat.buckets()[0].gradSpan().begin(), flat.buckets()[0].gradSpan().end()),
            std::vector<float>(7, 7.0f));
  EXPECT_EQ(std::vector<float>(flat.buckets()[1].gradSpan().begin(), flat.buckets()[1].gradSpan().end()),
            std::vector<float>(7, 1.0f));
}

TEST(FlatParameters, InvalidateGradsMakesTheNextBackwardOverwrite) {
  auto m = fourParameters();
  FlatParameters flat(*m, testDevice(), 7 * sizeof(float));
  const std::vector<std::string> all = {"a", "b", "child.c", "child.d"};
  backwardWithWeights(*m, all);
  backwardWithWeights(*m, all);  // accumulates, as torch without zero_grad
  EXPECT_EQ(flat.buckets()[1].gradSpan()[0], 2.0f);
  flat.invalidateGrads();
  for (const auto& p : m->namedParameters()) {
    EXPECT_FALSE(p.tensor.gradValid());
    EXPECT_FALSE(p.tensor.grad().defined());
  }
  backwardWithWeights(*m, all, 3.0f);
  EXPECT_EQ(flat.buckets()[1].gradSpan()[0], 3.0f) << "overwritten, not added to stale values";
  EXPECT_EQ(flat.buckets()[0].gradSpan()[6], 21.0f);
}

TEST(FlatParameters, ZeroMissingGradsZeroesOnlyParametersWithoutAGradient) {
  auto m = fourParameters();
  FlatParameters flat(*m, testDevice(), 7 * sizeof(float));
  for (auto& b : flat.buckets())
    for (float& g : b.gradSpan()) g = std::numeric_limits<float>::quiet_NaN();  // stale garbage
  flat.invalidateGrads();
  backwardWithWeights(*m, {"a", "child.c"});
  flat.zeroMissingGrads();
  for (const auto& p : m->namedParameters()) {
    SCOPED_TRACE(p.name);
    EXPECT_TRUE(p.tensor.gradValid());
    const float expected = p.name == "a" ? 1.0f : p.name == "child.c" ? 7.0f : 0.0f;
    EXPECT_EQ(p.tensor.grad().toHost(), std::vector<float>(static_cast<std::size_t>(p.tensor.numel()), expected));
  }
}

// ZeRO-2: gradient buckets exist only between the backward that needs them
// and releaseGrads().
TEST(FlatParameters, OnDemandGradientBucketsAreAllocatedByBackwardAndReleased) {
  // The bucket values replace the parameters' own storage: flattening costs
  // only the gradient buckets, and on-demand ones nothing up front.
  auto persistent = fourParameters();
  std::uint64_t before = testDevice().allocator().stats().inUse;
  FlatParameters eager(*persistent, testDevice(), 7 * sizeof(float));
  EXPECT_EQ(testDevice().allocator().stats().inUse - before, 14u * 4);
  auto m = fourParameters();
  before = testDevice().allocator().stats().inUse;
  FlatParameters flat(*m, testDevice(), 7 * sizeof(float), false);
  EXPECT_EQ(testDevice().allocator().stats().inUse, before);
  EXPECT_FALSE(flat.gradsAllocated(0));
  EXPECT_FALSE(flat.gradsAllocated(1));

  backwardWithWeights(*m, {"child.c"});  // touches bucket 0 only
  EXPECT_TRUE(flat.gradsAllocated(0));
  EXPECT_FALSE(flat.gradsAllocated(1));
  EXPECT_EQ(flat.buckets()[0].gradSpan()[2], 7.0f);
  EXPECT_EQ(m->namedParameters()[2].tensor.grad().storage(), flat.buckets()[0].grads);

  const std::uint64_t with_grads = testDevice().allocator().stats().inUse;
  flat.releaseGrads(0);
  EXPECT_FALSE(flat.gradsAllocated(0));
  EXPECT_EQ(with_grads - testDevice().allocator().stats().inUse, 7u * 4);
  EXPECT_FALSE(m->namedParameters()[2].tensor.grad().defined());

  backwardWithWeights(*m, {"child.c"}, 2.0f);
  EXPECT_EQ(flat.buckets()[0].gradSpan()[2], 14.0f) << "a fresh buffer is overwritten, never added to";
  flat.zeroMissingGrads();
  EXPECT_TRUE(flat.gradsAllocated(1));
  EXPECT_EQ(std::vector<float>(flat.buckets()[1].gradSpan().begin(), flat.buckets()[1].gradSpan().end()),
            std::vector<float>(7, 0.0f));
}

// y = linear(tanh(linear(x, w1, b1)), w2, b2), with buckets {b2, w2}, {b1},
// {w1} (cap 10 floats).
class TwoLayers : public ::testing::Test {
 protected:
  void SetUp() override {
    w1 = net.add("w1", {4, 3}, 0.1f);
    b1 = net.add("b1", {4}, 0.2f);
    w2 = net.add("w2", {2, 4}, -0.3f);
    b2 = net.add("b2", {2}, 0.4f);
    flat = std::make_unique<FlatParameters>(net, testDevice(), 10 * sizeof(float));
    flat->setBucketReadyCallback([this](std::size_t b) {
      fired.push_back(b);
      w1_ready_at_fire.push_back(w1.gradValid());
      w2_grad_at_fire.push_back(w2.gradValid() ? w2.grad().toHost() : std::vector<float>{});
    });
  }
  void step(bool reuse_w2 = false) {
    flat->beginStep();
    flat->invalidateGrads();
    const Tensor x = tensorOf({2, 3}, {0.5f, -1.0f, 2.0f, 1.5f, 0.25f, -0.75f});
    Tape tape;
    TapeScope scope(&tape);
    const Tensor h = ops::tanh(ops::linear(x, w1, b1));
    Tensor y = ops::linear(h, w2, b2);
    if (reuse_w2) y = ops::add(y, ops::linear(ops::sigmoid(h), w2, Tensor()));
    tape.backward(ops::sum(y));
  }
  Holder net;
  Tensor w1, b1, w2, b2;
  std::unique_ptr<FlatParameters> flat;
  std::vector<std::size_t> fired;
  std::vector<bool> w1_ready_at_fire;
  std::vector<std::vector<float>> w2_grad_at_fire;
};

TEST_F(TwoLayers, EachBucketFiresOnceAsSoonAsItsGradientsAreFinal) {
  ASSERT_EQ(layout(*flat), (std::vector<std::vector<std::string>>{{"b2", "w2"}, {"b1"}, {"w1"}}));
  step();
  // The last layer's bucket is ready while the first layer is still ahead.
  ASSERT_EQ(fired.size(), 3u);
  EXPECT_EQ(fired[0], 0u);
  EXPECT_FALSE(w1_ready_at_fire[0]);
  EXPECT_EQ(std::set<std::size_t>(fired.begin(), fired.end()), (std::set<std::size_t>{0, 1, 2}));
  step();
  EXPECT_EQ(fired.size(), 6u) << "once per bucket per step";
  EXPECT_EQ(std::vector<std::size_t>(fired.begin() + 3, fired.end()),
            std::vector<std::size_t>(fired.begin(), fired.begin() + 3));
}

TEST_F(TwoLayers, AParameterUsedTwiceIsReadyAfterItsLastUse) {
  step(true);
  ASSERT_EQ(fired.size(), 3u);
  const std::size_t at = static_cast<std::size_t>(std::find(fired.begin(), fired.end(), 0u) - fired.begin());
  ASSERT_LT(at, fired.size());
  EXPECT_EQ(w2_grad_at_fire[at], w2.grad().toHost()) << "fired with w2's complete gradient";
}

TEST_F(TwoLayers, ClearingTheCallbackStopsNotifications) {
  flat->setBucketReadyCallback(nullptr);
  step();
  EXPECT_TRUE(fired.empty());
  EXPECT_TRUE(w1.grad().defined());
}

}  // namespace
}  // namespace hpu::core::nn
