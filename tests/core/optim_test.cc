// Optimizers and LR schedulers step by step against PyTorch 1.13's numbers
// (fixtures/optim_torch.json, written once by fixtures/gen_optim_fixture.py),
// and DeepSpeed's WarmupDecayLR against its published formula.
//
// Tolerances: optimizer parameters are float32 computations of the same
// formulas in the same order as torch's single-tensor path; they may differ
// by fused multiply-adds (measured: at most 1 ulp), so each value must match
// within 4.8e-7 relative (4 ulps) plus 3e-8 absolute after every one of the
// 6 steps.
// Scheduler learning rates are doubles on both sides: 1e-12 relative.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "hpu/core/optim/lr_scheduler.h"
#include "hpu/core/optim/optimizer.h"
#include "hpu/device/cpu_isa.h"
#include "hpu/device/numerics.h"
#include "test_support.h"

namespace hpu::core::optim {
namespace {

using nlohmann::json;
using testing::buildComponent;
using testing::testDevice;

constexpr double kParamRtol = 4.8e-7, kParamAtol = 3e-8, kLrRtol = 1e-12;

const json& fixture() {
  static const json j = [] {
    std::ifstream in(std::string(HPU_SOURCE_DIR) + "/tests/core/fixtures/optim_torch.json");
    if (!in) throw std::runtime_error("missing tests/core/fixtures/optim_torch.json");
    return json::parse(in);
  }();
  return j;
}

std::vector<const json*> casesOf(const char* section, const std::string& kind) {
  std::vector<const json*> out;
  for (const json& c : fixture()[section])
    if (c["kind"] == kind) out.push_back(&c);
  return out;
}

std::unique_ptr<Optimizer> makeFromOptions(const std::string& kind, const json& o) {
  if (kind == "SGD")
    return makeSGD({o["lr"], o["momentum"], o["dampening"], o["weight_decay"], o["nesterov"]});
  if (kind == "RMSprop")
    return makeRMSprop({o["lr"], o["alpha"], o["eps"], o["weight_decay"], o["momentum"], o["centered"]});
  if (kind == "Adagrad")
    return makeAdagrad({o["lr"], o["lr_decay"], o["weight_decay"], o["initial_accumulator_value"], o["eps"]});
  AdamOptions a;
  a.lr = o["lr"];
  a.beta1 = o["betas"][0];
  a.beta2 = o["betas"][1];
  a.eps = o["eps"];
  a.weight_decay = o["weight_decay"];
  return kind == "AdamW" ? makeAdamW(a) : makeAdam(a);
}

// The same hyper-parameters as a config's optimizer: section.
std::unique_ptr<Optimizer> makeFromConfig(const std::string& kind, const json& o) {
  std::string args = "lr: " + o["lr"].dump();
  for (const char* key : {"momentum", "dampening", "weight_decay", "nesterov", "betas", "eps", "alpha", "centered",
                          "lr_decay", "initial_accumulator_value"})
    if (o.contains(key)) args += std::string(", ") + key + ": " + o[key].dump();
  return buildComponent<Optimizer>(config::ComponentKind::kOptimizer,
                                   "class_path: torch.optim." + kind + "\ninit_args: {" + args + "}", "optimizer");
}

// Steps `opt` over the fixture's gradients (two slices, 4 and 3 values) and
// compares the parameters with torch's after every step.
void expectTorchTrajectory(Optimizer& opt, const json& c, bool offload = false) {
  const json& f = fixture();
  std::vector<std::vector<float>> params, grads;
  for (const json& p : f["initial_params"]) {
    params.push_back(p.get<std::vector<float>>());
    grads.emplace_back(params.back().size());
  }
  std::vector<ParamSlice> slices;
  for (std::size_t i = 0; i < params.size(); ++i)
    slices.push_back({params[i].data(), grads[i].data(), static_cast<std::int64_t>(params[i].size()), DType::kFloat32});
  opt.attach(slices, testDevice(), offload);
  const int steps = f["steps"];
  for (int step = 0; step < steps; ++step) {
    if (!c["lrs"].is_null()) opt.setLr(c["lrs"][step]);
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const auto g = f["grads"][step][i].get<std::vector<float>>();
      std::copy(g.begin(), g.end(), grads[i].begin());  // in place: the slices point at it
    }
    opt.step();
    for (std::size_t i = 0; i < params.size(); ++i)
      for (std::size_t j = 0; j < params[i].size(); ++j) {
        const double expected = c["params_after"][step][i][j];
        ASSERT_NEAR(params[i][j], expected, kParamAtol + kParamRtol * std::abs(expected))
            << "step " << step + 1 << " slice " << i << " element " << j;
      }
  }
  EXPECT_EQ(opt.stepCount(), steps);
}

void runKind(const std::string& kind, std::size_t expected_cases, bool via_config) {
  const auto cases = casesOf("optimizers", kind);
  EXPECT_EQ(cases.size(), expected_cases);
  for (const json* c : cases) {
    SCOPED_TRACE((*c)["name"].get<std::string>() + " " + (*c)["options"].dump());
    auto opt = via_config ? makeFromConfig(kind, (*c)["options"]) : makeFromOptions(kind, (*c)["options"]);
    expectTorchTrajectory(*opt, *c);
  }
}

TEST(OptimizersVsTorch, SGDPlainMomentumDampeningNesterovWeightDecay) { runKind("SGD", 7, false); }
TEST(OptimizersVsTorch, Adam) { runKind("Adam", 4, false); }
TEST(OptimizersVsTorch, AdamW) { runKind("AdamW", 3, false); }
TEST(OptimizersVsTorch, RMSpropPlainMomentumCenteredWeightDecay) { runKind("RMSprop", 4, false); }
TEST(OptimizersVsTorch, AdagradLrDecayWeightDecayInitialAccumulator) { runKind("Adagrad", 2, false); }

// The registered components (torch class paths, config defaults such as
// AdamW's weight_decay 0.01) reach the same numbers.
TEST(OptimizersVsTorch, BuiltFromConfig) {
  runKind("SGD", 7, true);
  runKind("Adam", 4, true);
  runKind("AdamW", 3, true);
  runKind("RMSprop", 4, true);
  runKind("Adagrad", 2, true);
  for (const json* c : casesOf("optimizers", "AdamW")) {
    if ((*c)["name"] != "adamw_default_decay") continue;
    auto opt = buildComponent<Optimizer>(config::ComponentKind::kOptimizer, "class_path: AdamW\ninit_args: {lr: 0.02}",
                                         "optimizer");
    EXPECT_EQ(opt->name(), "AdamW");
    expectTorchTrajectory(*opt, *c);
  }
}

// torch 2.13's Adam(decoupled_weight_decay=True) is AdamW's rule: from a
// config it follows torch's AdamW numbers, and is still named Adam (the
// learning-rate monitor's lr-Adam, as torch's class).
TEST(OptimizersVsTorch, AdamWithDecoupledWeightDecayStepsAsAdamW) {
  const auto cases = casesOf("optimizers", "AdamW");
  ASSERT_EQ(cases.size(), 3u);
  for (const json* c : cases) {
    SCOPED_TRACE((*c)["name"].get<std::string>() + " " + (*c)["options"].dump());
    const json& o = (*c)["options"];
    ASSERT_GT(o["weight_decay"].get<double>(), 0.0);  // else the rules do not differ
    const std::string args = "lr: " + o["lr"].dump() + ", betas: " + o["betas"].dump() + ", eps: " + o["eps"].dump() +
                             ", weight_decay: " + o["weight_decay"].dump() + ", decoupled_weight_decay: true";
    auto opt = buildComponent<Optimizer>(config::ComponentKind::kOptimizer,
                                         "class_path: torch.optim.Adam\ninit_args: {" + args + "}", "optimizer");
    EXPECT_EQ(opt->name(), "Adam");
    expectTorchTrajectory(*opt, *c);
  }
}

// ZeRO-Offload: the state lives in host memory, the numbers do not change.
TEST(OptimizersVsTorch, OffloadedStateGivesTheSameNumbers) {
  for (const char* name : {"sgd_nesterov_weight_decay", "adam_weight_decay", "adamw_changing_lr"})
    for (const json& c : fixture()["optimizers"]) {
      if (c["name"] != name) continue;
      SCOPED_TRACE(name);
      auto opt = makeFromOptions(c["kind"], c["options"]);
      const std::uint64_t in_use = testDevice().allocator().stats().inUse;
      expectTorchTrajectory(*opt, c, true);
      EXPECT_EQ(testDevice().allocator().stats().inUse, in_use) << "no device memory for offloaded state";
    }
}

// Parameter groups against torch's add_param_group: one slice holds both
// tensors; the second is frozen (in no group: its values and state stay, its
// gradient is ignored) until it joins as group 1, whose lr then changes
// before every step, and whose steps count from 1 (Adam's bias correction,
// SGD's first momentum step).
TEST(OptimizersVsTorch, ParamGroupAddedDuringTrainingAndFrozenRanges) {
  const json& f = fixture();
  const json& pg = f["param_groups"];
  const int add_at = pg["add_at"], steps = f["steps"];
  EXPECT_EQ(pg["cases"].size(), 4u);
  for (const json& c : pg["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::vector<float> values, grads(7);
    for (const json& p : f["initial_params"])
      for (float v : p.get<std::vector<float>>()) values.push_back(v);
    ASSERT_EQ(values.size(), 7u);
    const std::vector<float> frozen(values.begin() + 4, values.end());
    auto opt = makeFromOptions(c["kind"], c["options"]);
    opt->attach({{values.data(), grads.data(), 7, DType::kFloat32}}, testDevice());
    opt->setGroupRanges({{{0, 4, 0}}});
    for (int step = 0; step < steps; ++step) {
      if (step == add_at) {
        EXPECT_EQ(opt->addGroup(pg["group_lrs"][step]), 1u);
        opt->setGroupRanges({{{0, 4, 0}, {4, 3, 1}}});
      } else if (step > add_at) {
        opt->setGroupLr(1, pg["group_lrs"][step]);
      }
      for (std::size_t i = 0, k = 0; i < 2; ++i)
        for (float g : f["grads"][step][i].get<std::vector<float>>()) grads[k++] = g;
      opt->step();
      if (step < add_at) {
        EXPECT_EQ(std::vector<float>(values.begin() + 4, values.end()), frozen) << "a frozen range moved";
        for (const auto& s : opt->stateBuffers())
          for (std::size_t j = 4; j < 7; ++j) ASSERT_EQ(s.values[j], 0.0f) << s.name << " of a frozen range";
      }
      for (std::size_t i = 0, k = 0; i < 2; ++i)
        for (const json& expected : c["params_after"][step][i]) {
          const double e = expected;
          ASSERT_NEAR(values[k], e, kParamAtol + kParamRtol * std::abs(e)) << "step " << step + 1 << " element " << k;
          ++k;
        }
    }
    EXPECT_EQ(opt->stepCount(), steps);
    EXPECT_EQ(opt->groupStepCount(1), steps - add_at);
  }
}

// The update loops run in a copy per vector level (device/vector_clones.h):
// every copy this CPU runs ends on the baseline copy's bits.
TEST(Optimizers, EveryVectorLevelGivesTheBaselineBits) {
  const device::CpuIsa before = device::cpuIsa();
  std::map<std::string, std::vector<float>> baseline;
  for (device::CpuIsa isa : device::supportedCpuIsas()) {
    device::setCpuIsa(isa);
    for (const char* name : {"sgd_nesterov_weight_decay", "adam_weight_decay", "adamw_changing_lr"})
      for (const json& c : fixture()["optimizers"]) {
        if (c["name"] != name) continue;
        std::vector<float> p(3001), g(3001);
        for (std::size_t i = 0; i < p.size(); ++i) {
          p[i] = std::sin(0.37f * static_cast<float>(i));
          g[i] = std::cos(1.3f * static_cast<float>(i)) * 0.1f;
        }
        auto opt = makeFromOptions(c["kind"], c["options"]);
        opt->attach({{p.data(), g.data(), static_cast<std::int64_t>(p.size()), DType::kFloat32}}, testDevice());
        for (int step = 0; step < 3; ++step) opt->step();
        if (!baseline.count(name))
          baseline[name] = p;
        else
          EXPECT_TRUE(p == baseline[name]) << name << " on " << device::cpuIsaName(isa);
      }
  }
  device::setCpuIsa(before);
}

std::vector<std::string> stateNames(Optimizer& opt) {
  std::vector<std::string> names;
  for (const auto& s : opt.stateBuffers()) names.push_back(s.name);
  return names;
}

TEST(Optimizers, StateBuffersAreNamedPerSliceAndLiveOnTheDevice) {
  float p[3] = {1, 2, 3}, g[3] = {0.1f, 0.2f, 0.3f}, q[2] = {1, 1}, h[2] = {1, 1};
  const std::uint64_t in_use = testDevice().allocator().stats().inUse;
  auto sgd = makeSGD({.lr = 0.1, .momentum = 0.9});
  sgd->attach({{p, g, 3, DType::kFloat32}, {q, h, 2, DType::kFloat32}}, testDevice());
  EXPECT_EQ(testDevice().allocator().stats().inUse - in_use, 5u * 4) << "one float32 buffer per slice element";
  EXPECT_EQ(stateNames(*sgd), (std::vector<std::string>{"momentum_buffer.0", "momentum_buffer.1"}));
  sgd->step();
  // First momentum step: buffer = gradient (torch clones d_p).
  const auto buffer = sgd->stateBuffers()[0].values;
  EXPECT_EQ(std::vector<float>(buffer.begin(), buffer.end()), (std::vector<float>{0.1f, 0.2f, 0.3f}));

  EXPECT_TRUE(makeSGD({.lr = 0.1})->stateBuffers().empty());
  auto adam = makeAdam({});
  adam->attach({{p, g, 3, DType::kFloat32}}, testDevice());
  EXPECT_EQ(stateNames(*adam), (std::vector<std::string>{"exp_avg.0", "exp_avg_sq.0"}));
  EXPECT_EQ(makeAdamW({})->name(), "AdamW");
  EXPECT_EQ(makeAdam({})->name(), "Adam");
}

TEST(Optimizers, LowPrecisionSlicesAreRoundedAfterEachUpdate) {
  std::vector<float> p = {1.0f, -0.3f, 0.7f}, g = {0.0123f, -0.0456f, 0.0789f};
  device::roundInPlace(p, DType::kBFloat16);
  auto sgd = makeSGD({.lr = 0.01});
  sgd->attach({{p.data(), g.data(), 3, DType::kBFloat16}}, testDevice());
  sgd->step();
  for (float v : p) EXPECT_EQ(device::fromBFloat16Bits(device::toBFloat16Bits(v)), v) << v << " is not a bfloat16";
  EXPECT_EQ(p[0], 1.0f) << "1 - 1.23e-4 rounds back to 1 in bfloat16";
}

// A half-precision model's slices (DeepSpeed's bf16 mode) are stepped through
// fp32 master weights, the "master" state of each slice (on the device): the
// masters follow the fp32 trajectory exactly and the values are the masters
// rounded to bf16. Steps of 1.23e-4 below 1, where bf16's spacing is 2^-8,
// leave the value at 1 but accumulate in the master.
TEST(Optimizers, HalfPrecisionModelsStepFp32MasterWeights) {
  std::vector<float> p = {1.0f, -0.3f, 0.7f}, g = {0.0123f, -0.0456f, 0.0789f};
  device::roundInPlace(p, DType::kBFloat16);
  std::vector<float> reference = p;  // the same steps in fp32
  auto sgd = makeSGD({.lr = 0.01}), fp32 = makeSGD({.lr = 0.01});
  const std::uint64_t in_use = testDevice().allocator().stats().inUse;
  sgd->attach({{p.data(), g.data(), 3, DType::kBFloat16, /*master=*/true}}, testDevice());
  EXPECT_EQ(testDevice().allocator().stats().inUse - in_use, 3u * 4) << "an fp32 master on the device";
  fp32->attach({{reference.data(), g.data(), 3, DType::kFloat32}}, testDevice());
  EXPECT_EQ(stateNames(*sgd), (std::vector<std::string>{"master.0"}));
  for (int step = 0; step < 4; ++step) {
    sgd->step();
    fp32->step();
  }
  const auto master = sgd->stateBuffers()[0].values;
  for (std::size_t i = 0; i < p.size(); ++i) {
    EXPECT_EQ(master[i], reference[i]) << i;
    EXPECT_EQ(p[i], device::roundTo(reference[i], DType::kBFloat16)) << i;
  }
  EXPECT_NE(master[0], 1.0f) << "the updates a bf16 parameter would lose stay in the master";
  // Loaded weights (a checkpoint's) replace the masters.
  p = {0.5f, 0.25f, -2.0f};
  sgd->parametersLoaded();
  EXPECT_EQ(std::vector<float>(master.begin(), master.end()), p);
  std::vector<float> q = {1, 2};
  EXPECT_DEATH(makeSGD({.lr = 0.1})->attach({{p.data(), g.data(), 3, DType::kBFloat16, true},
                                               {q.data(), g.data(), 2, DType::kBFloat16, false}},
                                              testDevice()),
               "master weights for some slices only");
}

// ------------------------------------------------------------------ schedulers

void expectLrs(const std::vector<double>& got, const json& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double e = expected[i];
    EXPECT_NEAR(got[i], e, kLrRtol * std::abs(e) + 1e-300) << "after " << i << " steps";
  }
}

std::unique_ptr<LRScheduler> makeScheduler(const json& c) {
  const std::string kind = c["kind"];
  const json& o = c["options"];
  if (kind == "StepLR") return makeStepLR(o["step_size"], o["gamma"]);
  if (kind == "MultiStepLR") return makeMultiStepLR(o["milestones"].get<std::vector<std::int64_t>>(), o["gamma"]);
  if (kind == "CosineAnnealingLR") return makeCosineAnnealingLR(o["T_max"], o["eta_min"]);
  PlateauOptions p;
  p.monitor = "val_loss";
  p.mode_max = o["mode"] == "max";
  p.factor = o["factor"];
  p.patience = o["patience"];
  p.threshold = o["threshold"];
  p.threshold_rel = o["threshold_mode"] == "rel";
  p.cooldown = o.value("cooldown", 0);
  p.min_lr = o.value("min_lr", 0.0);
  return makeReduceLROnPlateau(p);
}

TEST(SchedulersVsTorch, EpochSchedulersSteppedPerEpoch) {
  int seen = 0;
  for (const char* kind : {"StepLR", "MultiStepLR", "CosineAnnealingLR"})
    for (const json* c : casesOf("schedulers", kind)) {
      SCOPED_TRACE((*c)["name"].get<std::string>());
      ++seen;
      auto opt = makeSGD({.lr = (*c)["base_lr"]});
      auto sched = makeScheduler(*c);
      EXPECT_EQ(sched->interval(), LRScheduler::Interval::kEpoch);
      EXPECT_EQ(sched->monitor(), "");
      sched->attach(*opt);
      EXPECT_EQ(sched->lastEpoch(), 0);
      std::vector<double> lrs{opt->lr()};
      for (std::size_t e = 1; e < (*c)["lrs"].size(); ++e) {
        sched->step();
        lrs.push_back(opt->lr());
      }
      expectLrs(lrs, (*c)["lrs"]);
    }
  EXPECT_EQ(seen, 5);
}

TEST(SchedulersVsTorch, ReduceLROnPlateauModesThresholdsCooldownMinLr) {
  const auto cases = casesOf("schedulers", "ReduceLROnPlateau");
  EXPECT_EQ(cases.size(), 4u);
  for (const json* c : cases) {
    SCOPED_TRACE((*c)["name"].get<std::string>() + " " + (*c)["options"].dump());
    auto opt = makeSGD({.lr = (*c)["base_lr"]});
    auto sched = makeScheduler(*c);
    EXPECT_EQ(sched->monitor(), "val_loss");
    sched->attach(*opt);
    EXPECT_EQ(opt->lr(), 0.1) << "attaching does not change the lr";
    std::vector<double> lrs;
    for (double m : (*c)["metrics"]) {
      sched->step(m);
      lrs.push_back(opt->lr());
    }
    expectLrs(lrs, (*c)["lrs"]);
  }
}

// SWALR as StochasticWeightAveraging builds it: cosine and linear annealing
// down and up to swa_lr, the default 10 epochs, and none (swa_lr at once),
// on SGD with lr 0.1, resumed halfway from state() and the lr.
TEST(SchedulersVsTorch, SWALRAnnealsToTheSwaLr) {
  const json& cases = fixture()["swa_schedulers"];
  EXPECT_EQ(cases.size(), 4u);
  for (const json& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto make = [&] { return makeSWALR(c["swa_lr"], c["annealing_epochs"], c["annealing_strategy"] == "cos"); };
    auto opt = makeSGD({.lr = 0.1});
    auto sched = make();
    EXPECT_EQ(sched->name(), "SWALR");
    EXPECT_EQ(sched->interval(), LRScheduler::Interval::kEpoch);
    sched->attach(*opt);
    std::vector<double> lrs{opt->lr()};
    std::unique_ptr<LRScheduler> resumed;
    auto resumed_opt = makeSGD({.lr = 0.1});
    for (std::size_t e = 1; e < c["lrs"].size(); ++e) {
      sched->step();
      lrs.push_back(opt->lr());
      if (e == 2) {
        resumed = make();
        resumed->attach(*resumed_opt);
        resumed->loadState(sched->state());
        resumed_opt->setLr(opt->lr());
      } else if (resumed) {
        resumed->step();
        EXPECT_EQ(resumed_opt->lr(), opt->lr()) << "after " << e << " steps";
      }
    }
    expectLrs(lrs, c["lrs"]);
  }
}

// Schedulers built from their config section, as the lr_scheduler key
// gives them (SequentialLR's schedulers nested), on SGD or Adam with lr 0.1:
// the lr and the momentum (Adam's beta1) after construction and each epoch.
TEST(SchedulersVsTorch, ExponentialLinearOneCycleSequentialFromConfig) {
  const json& cases = fixture()["configured_schedulers"];
  EXPECT_EQ(cases.size(), 7u);
  for (const json& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::unique_ptr<Optimizer> opt = c["optimizer"] == "Adam" ? makeAdam({.lr = 0.1}) : makeSGD({.lr = 0.1});
    auto sched = buildComponent<LRScheduler>(config::ComponentKind::kLRScheduler, c["config"].dump(), "lr_scheduler");
    EXPECT_EQ(sched->interval(), LRScheduler::Interval::kEpoch);
    sched->attach(*opt);
    std::vector<double> lrs{opt->lr()}, momentums{*opt->momentum()};
    for (std::size_t e = 1; e < c["lrs"].size(); ++e) {
      sched->step();
      lrs.push_back(opt->lr());
      momentums.push_back(*opt->momentum());
    }
    expectLrs(lrs, c["lrs"]);
    expectLrs(momentums, c["momentums"]);
  }
}

TEST(SchedulersVsTorch, OneCycleAndSequentialRefuseWhatTorchRefuses) {
  auto sched = buildComponent<LRScheduler>(config::ComponentKind::kLRScheduler,
                                           "{class_path: OneCycleLR, init_args: {max_lr: 1.0, total_steps: 2}}",
                                           "lr_scheduler");
  auto opt = makeSGD({.lr = 0.1});
  sched->attach(*opt);
  sched->step();
  sched->step();
  EXPECT_THROW(
      try { sched->step(); } catch (const UsageError& e) {
        EXPECT_STREQ(e.what(), "Tried to step 3 times. The specified number of total steps is 2");
        throw;
      },
      UsageError);
  auto adagrad = makeAdagrad({});
  auto cycling = buildComponent<LRScheduler>(config::ComponentKind::kLRScheduler,
                                             "{class_path: OneCycleLR, init_args: {max_lr: 1.0, total_steps: 4}}",
                                             "lr_scheduler");
  EXPECT_THROW(cycling->attach(*adagrad), UsageError);
  EXPECT_THROW(buildComponent<LRScheduler>(config::ComponentKind::kLRScheduler,
                                           "{class_path: OneCycleLR, init_args: {max_lr: 1.0}}", "lr_scheduler"),
               ConfigError);
  EXPECT_THROW(buildComponent<LRScheduler>(config::ComponentKind::kLRScheduler,
                                           "{class_path: SequentialLR, init_args: {schedulers: [ExponentialLR], "
                                           "milestones: [2]}}",
                                           "lr_scheduler"),
               ConfigError);
}

// A scheduler restored from state() (with the optimizer's lr) continues
// exactly as the uninterrupted one.
TEST(SchedulersVsTorch, ResumedFromStateContinuesTheSameSequence) {
  for (const char* name : {"cosine", "plateau_min_abs_cooldown", "multi_step_lr"}) {
    SCOPED_TRACE(name);
    const json* c = nullptr;
    for (const json& s : fixture()["schedulers"])
      if (s["name"] == name) c = &s;
    ASSERT_NE(c, nullptr);
    const bool plateau = (*c)["kind"] == "ReduceLROnPlateau";
    const std::size_t n = plateau ? (*c)["metrics"].size() : (*c)["lrs"].size() - 1, cut = n / 2;
    auto metric = [&](std::size_t i) { return plateau ? std::optional<double>((*c)["metrics"][i]) : std::nullopt; };

    auto opt = makeSGD({.lr = 0.1});
    auto first = makeScheduler(*c);
    first->attach(*opt);
    for (std::size_t i = 0; i < cut; ++i) first->step(metric(i));

    auto opt2 = makeSGD({.lr = 0.1});
    auto second = makeScheduler(*c);
    second->attach(*opt2);
    opt2->setLr(opt->lr());
    second->loadState(first->state());
    std::vector<double> lrs;
    for (std::size_t i = cut; i < n; ++i) {
      second->step(metric(i));
      lrs.push_back(opt2->lr());
    }
    const json& all = (*c)["lrs"];
    expectLrs(lrs, json(std::vector<double>(all.begin() + static_cast<std::ptrdiff_t>(plateau ? cut : cut + 1), all.end())));
  }
}

// DeepSpeed's WarmupDecayLR: lr(t) = min + (max - min) * gamma(t) with
// W = max(2, warmup_num_steps), T = total_num_steps and
//   gamma(t) = ln(t + 1) / ln(W)            (log warmup, t < W)
//            = t / W                         (linear warmup, t < W)
//            = max(0, (T - t) / max(1, T - W))   (t >= W).
// t counts scheduler steps; attach() makes t = 0. Values below are that
// formula evaluated in double.
std::vector<double> warmupLrs(const WarmupDecayOptions& o, int steps) {
  auto opt = makeSGD({.lr = 123.0});  // ignored: the schedule sets its own lr
  auto sched = makeWarmupDecayLR(o);
  EXPECT_EQ(sched->interval(), LRScheduler::Interval::kStep);
  sched->attach(*opt);
  std::vector<double> lrs{opt->lr()};
  for (int t = 1; t < steps; ++t) {
    sched->step();
    lrs.push_back(opt->lr());
  }
  return lrs;
}

TEST(WarmupDecayLR, LogWarmupThenLinearDecay) {
  const auto lrs = warmupLrs({.warmup_min_lr = 0.01, .warmup_max_lr = 0.1, .warmup_num_steps = 5,
                              .total_num_steps = 12, .log_warmup = true},
                             15);
  expectLrs(lrs, {0.01, 0.04876089022660538, 0.07143455750373869, 0.08752178045321075, 0.1, 0.1,
                  0.08714285714285715, 0.07428571428571429, 0.06142857142857144, 0.04857142857142858,
                  0.03571428571428572, 0.02285714285714286, 0.01, 0.01, 0.01});
}

TEST(WarmupDecayLR, LinearWarmupThenLinearDecay) {
  const auto lrs = warmupLrs({.warmup_min_lr = 0.01, .warmup_max_lr = 0.1, .warmup_num_steps = 5,
                              .total_num_steps = 12, .log_warmup = false},
                             15);
  expectLrs(lrs, {0.01, 0.028000000000000004, 0.046000000000000006, 0.064, 0.082, 0.1, 0.08714285714285715,
                  0.07428571428571429, 0.06142857142857144, 0.04857142857142858, 0.03571428571428572,
                  0.02285714285714286, 0.01, 0.01, 0.01});
}

TEST(WarmupDecayLR, WarmupOfOneStepIsClampedToTwo) {
  const auto lrs = warmupLrs({.warmup_min_lr = 0.0, .warmup_max_lr = 0.001, .warmup_num_steps = 1,
                              .total_num_steps = 4, .log_warmup = true},
                             6);
  expectLrs(lrs, {0.0, 0.001, 0.001, 0.0005, 0.0, 0.0});
}

}  // namespace
}  // namespace hpu::core::optim
