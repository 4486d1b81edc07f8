// Precision: the autocast policy per op, LOWER_LIST/FP32_LIST overrides,
// nesting of autocast regions, dynamic loss scaling, fp8 delayed scaling,
// and the generation checks.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "hpu/core/base/errors.h"
#include "hpu/core/nn/layers.h"
#include "hpu/core/nn/flat_parameters.h"
#include "hpu/core/precision/precision.h"
#include "hpu/core/ops/autocast.h"
#include "hpu/core/tensor/autograd.h"
#include "hpu/core/ops/ops.h"
#include "hpu/device/errors.h"
#include "hpu/device/numerics.h"
#include "hpu/device/platform.h"
#include "hpu/core/precision/fp8.h"

namespace hpu::core {
namespace {

using device::DType;

class PrecisionTest : public ::testing::Test {
 protected:
  device::Platform platform_ = device::Platform::fromEnv(Environment{{"HPU_EMULATOR_DEVICES", "1"}});
  device::Device& dev_ = platform_.device(0);
  Generator rng_{7};

  Tensor random(const Shape& s, DType dt = DType::kFloat32) {
    std::vector<float> v(static_cast<std::size_t>(s.numel()));
    for (float& x : v) x = rng_.normal();
    return Tensor::fromHost(dev_, s, v, dt);
  }
  void TearDown() override { autocast::installPolicy(autocast::Policy::defaults()); }
};

std::vector<ops::OpTraceEntry> traceMlpStep(device::Device& dev, Tensor x, Tensor w1, Tensor w2, Tensor labels) {
  std::vector<ops::OpTraceEntry> trace;
  ops::OpTraceScope scope(trace);
  Tensor h = ops::relu(ops::linear(x, w1, Tensor()));
  Tensor logits = ops::linear(h, w2, Tensor());
  ops::crossEntropy(logits, labels);
  return trace;
}

DType dtypeOf(const std::vector<ops::OpTraceEntry>& trace, const std::string& op, int nth = 0) {
  for (const auto& e : trace)
    if (e.op == op && nth-- == 0) return e.dtype;
  ADD_FAILURE() << "op " << op << " not traced";
  return DType::kFloat64;
}

// bf16 products run on bf16 operands (products exact, sums in fp32); attention
// also rounds its probabilities and their gradients to bf16 for its
// products, as FlashAttention does. Against the same values in fp32: linear
// within one bf16 rounding of its output, attention within bf16 precision.
TEST_F(PrecisionTest, Bf16ProductsMatchFp32OnTheSameValues) {
  const auto run = [&](DType dt, std::uint64_t seed) {
    rng_ = Generator(seed);
    Tensor q = random({2, 4, 70, 16}, dt), k = random({2, 2, 70, 16}, dt), v = random({2, 2, 70, 16}, dt);
    Tensor x = random({70, 40}, dt), w = random({24, 40}, dt), dy = random({2, 4, 70, 16}, dt);
    for (Tensor* t : {&q, &k, &v, &x, &w}) t->setRequiresGrad(true);
    autograd::Tape tape;
    std::vector<Tensor> out;
    {
      autograd::TapeScope scope(&tape);
      Tensor y = ops::scaledDotProductAttention(q, k, v, {.causal = true});
      out = {y, ops::linear(x, w, Tensor())};
      tape.backward(ops::add(ops::sum(ops::mul(y, dy)), ops::sum(out[1])));
    }
    for (Tensor* t : {&q, &k, &v, &x, &w}) out.push_back(t->grad());
    return out;
  };
  const std::vector<Tensor> low = run(DType::kBFloat16, 11), full = run(DType::kFloat32, 11);
  const char* names[] = {"attention", "linear", "dq", "dk", "dv", "dx", "dw"};
  for (std::size_t i = 0; i < low.size(); ++i) {
    SCOPED_TRACE(names[i]);
    const std::vector<float> a = low[i].toHost(), b = full[i].toHost();
    ASSERT_EQ(a.size(), b.size());
    double err = 0, scale = 0;
    for (std::size_t j = 0; j < a.size(); ++j) {
      err = std::max(err, static_cast<double>(std::fabs(a[j] - b[j])));
      scale = std::max(scale, static_cast<double>(std::fabs(b[j])));
    }
    // bf16 keeps 8 significant bits: a rounding is at most 2^-9 of the value.
    EXPECT_LE(err, (i == 1 ? 0x1p-8 : 0x1p-5) * scale) << "largest |value| " << scale;
    EXPECT_GT(err, 0.0) << "the bf16 run rounds";
  }
}

TEST_F(PrecisionTest, Bf16AutocastRunsMatmulsLowAndLossesInFp32) {
  Tensor x = random({4, 8}), w1 = random({6, 8}), w2 = random({3, 6});
  Tensor labels = Tensor::fromHost(dev_, {4}, std::vector<std::int64_t>{0, 1, 2, 0});
  auto fp32 = traceMlpStep(dev_, x, w1, w2, labels);
  EXPECT_EQ(dtypeOf(fp32, "linear"), DType::kFloat32);
  autocast::Scope on(true, DType::kBFloat16);
  auto trace = traceMlpStep(dev_, x, w1, w2, labels);
  EXPECT_EQ(dtypeOf(trace, "linear", 0), DType::kBFloat16);
  EXPECT_EQ(dtypeOf(trace, "relu"), DType::kBFloat16);  // follows its bf16 input
  EXPECT_EQ(dtypeOf(trace, "linear", 1), DType::kBFloat16);
  EXPECT_EQ(dtypeOf(trace, "cross_entropy"), DType::kFloat32);
}

TEST_F(PrecisionTest, Bf16OutputsAreRoundedAndAccountedAtTwoBytes) {
  Tensor x = random({16, 32}), w = random({32, 32});
  autocast::Scope on(true, DType::kBFloat16);
  dev_.allocator().resetPeakStats();
  const auto before = dev_.allocator().stats().inUse;
  Tensor y = ops::linear(x, w, Tensor());
  EXPECT_EQ(y.dtype(), DType::kBFloat16);
  for (float v : y.values()) EXPECT_EQ(v, device::roundTo(v, DType::kBFloat16));
  // Outside training nothing keeps the bf16 copies of x and w: only y
  // (16x32 at 2 bytes) stays; during the op all three were live.
  const auto stats = dev_.allocator().stats();
  EXPECT_EQ(stats.inUse - before, 2u * 16 * 32);
  EXPECT_EQ(stats.maxInUse - before, 2u * (16 * 32 + 16 * 32 + 32 * 32));
}

TEST_F(PrecisionTest, NestedRegionsFollowTorchAutocast) {
  Tensor x = random({2, 4}), w = random({4, 4});
  autocast::Scope outer(true, DType::kBFloat16);
  EXPECT_EQ(ops::linear(x, w, Tensor()).dtype(), DType::kBFloat16);
  {
    autocast::Scope off(false);
    EXPECT_EQ(ops::linear(x, w, Tensor()).dtype(), DType::kFloat32);
    {
      autocast::Scope fp16(true, DType::kFloat16);
      EXPECT_EQ(ops::linear(x, w, Tensor()).dtype(), DType::kFloat16);
    }
    EXPECT_EQ(ops::linear(x, w, Tensor()).dtype(), DType::kFloat32);
  }
  EXPECT_EQ(ops::linear(x, w, Tensor()).dtype(), DType::kBFloat16);
}

class OpListFiles : public PrecisionTest {
 protected:
  std::filesystem::path dir_ = std::filesystem::temp_directory_path() / ("hpu_oplists_" + std::to_string(::getpid()));
  void SetUp() override { std::filesystem::create_directories(dir_); }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    PrecisionTest::TearDown();
  }
  std::string write(const std::string& name, const std::string& text) {
    const auto p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
};

TEST_F(OpListFiles, ListsReplaceTheBuiltInOnes) {
  // linear moves to FP32, cross_entropy to the lower list.
  const std::string lower = write("lower.txt", "# ops in bf16\nmatmul\ncross_entropy\n");
  const std::string fp32 = write("fp32.txt", "linear\n");
  autocast::installPolicy(autocast::Policy::fromEnv({{"LOWER_LIST", lower}, {"FP32_LIST", fp32}}));
  Tensor x = random({4, 8}), w1 = random({6, 8}), w2 = random({3, 6});
  Tensor labels = Tensor::fromHost(dev_, {4}, std::vector<std::int64_t>{0, 1, 2, 0});
  autocast::Scope on(true, DType::kBFloat16);
  auto trace = traceMlpStep(dev_, x, w1, w2, labels);
  EXPECT_EQ(dtypeOf(trace, "linear"), DType::kFloat32);
  EXPECT_EQ(dtypeOf(trace, "cross_entropy"), DType::kBFloat16);
}

TEST_F(OpListFiles, UnknownOpNameIsRefusedWithTheList) {
  const std::string lower = write("lower.txt", "linear\nconvolution\n");
  try {
    autocast::Policy::fromEnv({{"LOWER_LIST", lower}});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(lower + ":2: LOWER_LIST names 'convolution', which is not an op; ops are: linear, matmul, conv2d"),
              std::string::npos)
        << msg;
  }
}

TEST_F(PrecisionTest, LossScalerSkipsNonFiniteStepsAndBacksOff) {
  auto model = std::make_shared<nn::Sequential>();
  nn::InitContext ctx{dev_, rng_, rng_};
  model->append(std::make_shared<nn::Linear>(ctx, 3, 2));
  nn::FlatParameters params(*model, dev_, 1 << 20);
  auto plugin = makePrecisionPlugin("16-mixed");
  EXPECT_EQ(plugin->lossScale(), 65536.0f);
  auto fill = [&](float v) {
    for (auto& b : params.buckets())
      for (float& g : b.gradSpan()) g = v;
  };
  optim::GradientView grads;
  for (auto& b : params.buckets()) grads.spans.push_back(b.gradSpan());
  fill(65536.0f * 0.5f);
  EXPECT_TRUE(plugin->prepareStep(grads));
  EXPECT_FLOAT_EQ(params.buckets()[0].gradSpan()[0], 0.5f);  // unscaled
  fill(INFINITY);
  EXPECT_FALSE(plugin->prepareStep(grads));
  EXPECT_EQ(plugin->lossScale(), 32768.0f);
  EXPECT_NE(plugin->summary().find("1 of 2 steps skipped"), std::string::npos) << plugin->summary();
  // The state survives a checkpoint round trip.
  auto restored = makePrecisionPlugin("16-mixed");
  restored->loadStateJson(plugin->stateJson());
  EXPECT_EQ(restored->lossScale(), 32768.0f);
}

TEST_F(PrecisionTest, DeepSpeedLossScalerHasHysteresisAFloorAndAStaticMode) {
  auto model = std::make_shared<nn::Sequential>();
  nn::InitContext ctx{dev_, rng_, rng_};
  model->append(std::make_shared<nn::Linear>(ctx, 3, 2));
  nn::FlatParameters params(*model, dev_, 1 << 20);
  optim::GradientView grads;
  for (auto& b : params.buckets()) grads.spans.push_back(b.gradSpan());
  auto step = [&](PrecisionPlugin& p, float g) {
    for (auto& b : params.buckets())
      for (float& v : b.gradSpan()) v = g;
    return p.prepareStep(grads);
  };
  // initial 2^4, window 3, hysteresis 2, floor 4.
  auto dynamic = makePrecisionPlugin("16-mixed", {}, {.initial_scale = 16, .growth_interval = 3, .hysteresis = 2, .min_scale = 4});
  EXPECT_FALSE(step(*dynamic, INFINITY));
  EXPECT_EQ(dynamic->lossScale(), 16.0f) << "the first overflow is absorbed by the hysteresis";
  EXPECT_FALSE(step(*dynamic, NAN));
  EXPECT_EQ(dynamic->lossScale(), 8.0f);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(step(*dynamic, 1.0f));
  EXPECT_EQ(dynamic->lossScale(), 16.0f) << "3 clean steps double it";
  for (int i = 0; i < 6; ++i) EXPECT_FALSE(step(*dynamic, INFINITY));
  EXPECT_EQ(dynamic->lossScale(), 4.0f) << "halved every second overflow, never below min_loss_scale";

  auto fixed = makePrecisionPlugin("16-mixed", {}, {.initial_scale = 128, .dynamic = false});
  EXPECT_FALSE(step(*fixed, INFINITY));
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(step(*fixed, 256.0f));
  EXPECT_EQ(fixed->lossScale(), 128.0f);
  EXPECT_FLOAT_EQ(params.buckets()[0].gradSpan()[0], 2.0f);  // unscaled by the static scale
  EXPECT_NE(fixed->summary().find("1 of 6 steps skipped"), std::string::npos) << fixed->summary();
}

TEST(Fp8DelayedScaling, ScaleComesFromTheAmaxWindow) {
  // Two tensors (E4M3, E5M2), a window of 2 steps, newest row first.
  std::vector<float> history(4, 0.0f), scale{1.0f, 1.0f};
  const std::array<DType, 2> formats{DType::kFloat8E4M3, DType::kFloat8E5M2};
  const auto step = [&](float a, float b, int margin) {
    const std::array<float, 2> amax{a, b};
    fp8::moveScales(history, scale, amax, formats, margin);
  };
  step(4.0f, 8.0f, 0);
  EXPECT_EQ(history, (std::vector<float>{4, 8, 0, 0}));
  EXPECT_FLOAT_EQ(scale[0], 448.0f / 4.0f);
  EXPECT_FLOAT_EQ(scale[1], 57344.0f / 8.0f);
  step(2.0f, 16.0f, 0);  // windows {2, 4} and {16, 8}
  EXPECT_EQ(history, (std::vector<float>{2, 16, 4, 8}));
  EXPECT_FLOAT_EQ(scale[0], 448.0f / 4.0f);
  EXPECT_FLOAT_EQ(scale[1], 57344.0f / 16.0f);
  step(1.0f, 1.0f, 1);  // {1, 2}: max 2; {1, 16}: max 16; margin 1
  EXPECT_FLOAT_EQ(scale[0], 448.0f / 2.0f / 2.0f);
  EXPECT_FLOAT_EQ(scale[1], 57344.0f / 16.0f / 2.0f);
  step(0.0f, 0.0f, 0);  // {0, 1}: max 1
  EXPECT_FLOAT_EQ(scale[0], 448.0f);
  step(0.0f, 0.0f, 0);  // a window of zeros keeps the previous scales
  EXPECT_EQ(history, (std::vector<float>{0, 0, 0, 0}));
  EXPECT_FLOAT_EQ(scale[0], 448.0f);
  EXPECT_FLOAT_EQ(scale[1], 57344.0f);
}

TEST(Fp8Stats, MeasurementFilesRoundTripAndRefuseMaximaPastFloat) {
  fp8::Stats s;
  s.inputs["fc"] = 3.5f;
  s.weights["fc"] = 0.25f;
  const fp8::Stats back = fp8::Stats::fromJson(s.toJson(), "m.json");
  EXPECT_EQ(back.inputs, s.inputs);
  EXPECT_EQ(back.weights, s.weights);
  try {
    fp8::Stats::fromJson(R"({"Nodes": {"fc": {"inputs": [1e300], "params": {"weight": 2}}}})", "m.json");
    ADD_FAILURE() << "a maximum past float's range was taken";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "m.json is not an fp8 measurement file: fc's maxima 1e+300 and 2 are not float numbers");
  }
}

TEST_F(PrecisionTest, Fp8LinearMatchesFakeQuantizedGemm) {
  auto model = std::make_shared<nn::Sequential>();
  nn::InitContext ctx{dev_, rng_, rng_};
  auto linear = std::make_shared<nn::Linear>(ctx, 8, 4, false);
  model->append(linear);
  Fp8Options o;
  ASSERT_EQ(fp8::convertForTraining(*model, o), 1);
  EXPECT_EQ(model->children()[0].second->typeName(), "Fp8Linear");
  EXPECT_EQ(model->namedParameters()[0].name, "0.weight");  // names survive the conversion
  Tensor x = random({3, 8});
  Tensor y = (*model)(x);
  EXPECT_EQ(y.dtype(), DType::kBFloat16);
  // First step: scales are 1, so values are rounded straight to E4M3.
  std::vector<float> xq = x.toHost(), wq = linear->weight.toHost();
  device::roundInPlace(xq, DType::kFloat8E4M3);
  device::roundInPlace(wq, DType::kFloat8E4M3);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) {
      float acc = 0;
      for (int k = 0; k < 8; ++k) acc += xq[r * 8 + k] * wq[c * 8 + k];
      EXPECT_EQ(y.data()[r * 4 + c], device::roundTo(acc, DType::kBFloat16)) << r << "," << c;
    }
}

TEST(PrecisionGeneration, Fp8AndFp16NeedGaudi2) {
  device::Platform gaudi = device::Platform::fromEnv(Environment{{"HPU_EMULATOR_GENERATION", "gaudi"}, {"HPU_EMULATOR_DEVICES", "1"}});
  try {
    makePrecisionPlugin("fp8")->checkDevice(gaudi.device(0));
    FAIL() << "expected UnsupportedDTypeError";
  } catch (const device::UnsupportedDTypeError& e) {
    EXPECT_STREQ(e.what(), "hpu:0: FP8 not supported on Gaudi, Gaudi2 or higher required");
  }
  EXPECT_THROW(makePrecisionPlugin("16-mixed")->checkDevice(gaudi.device(0)), device::UnsupportedDTypeError);
  EXPECT_NO_THROW(makePrecisionPlugin("bf16-mixed")->checkDevice(gaudi.device(0)));
  device::Platform gaudi2 = device::Platform::fromEnv(Environment{{"HPU_EMULATOR_DEVICES", "1"}});
  EXPECT_NO_THROW(makePrecisionPlugin("fp8")->checkDevice(gaudi2.device(0)));
}

TEST(PrecisionNames, UnknownPrecisionListsTheValidOnes) {
  try {
    makePrecisionPlugin("bf17-mixed");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "trainer.precision: 'bf17-mixed' is not one of 32, 32-true, bf16, bf16-mixed, bf16-true, 16, 16-mixed, fp8");
  }
}

}  // namespace
}  // namespace hpu::core
