// HPUDeepSpeedStrategy through the real binary, its ranks local processes on
// loopback: every ZeRO stage (and offload, and activation checkpointing)
// trains to hpu_parallel's weights on 2 and 4 ranks; device memory follows
// the ZeRO paper's formulas and its peak drops as the stage rises; the
// DeepSpeed config drives the batch, the precision and the learning-rate
// schedule, loses to the model's and the config's optimizer and scheduler,
// and fails on a broken batch rule or an unsupported key; sharded
// checkpoints resume and consolidate. The config rules alone are unit-tested
// in tests/core/deepspeed_config_test.cc.
//
// HPUFSDPStrategy (and Lightning's FSDPStrategy, and `fsdp`) runs on the same
// ZeRO machinery under FSDP's keys: each sharding strategy trains as its ZeRO
// stage bit for bit, HYBRID_SHARD as hpu_parallel, its checkpoints are the
// consolidated ZeRO ones, its policies recompute and group modules, and keys
// without a meaning here are refused by name.
//
// Runs train a small MLP (dropout 0) on a 96-row CSV written by the test:
// a few dozen steps, well under a second each.
//
// Tolerance: weights after the same steps agree with hpu_parallel's to
// |a - b| <= 1e-6 + 1e-5 |a| (ZeRO-2/3 reduce-scatter where hpu_parallel
// all-reduces, so sums over ranks may be ordered differently); a resumed
// sharded checkpoint with the same strategy and world size is bit-exact.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "train_support.h"

namespace hpu::cli::testing {
namespace {

using core::checkpoint::Checkpoint;

// 96 samples of 6 features in [-2, 2] and a label in {0, 1, 2} that depends
// on them; the same text on every platform.
std::string trainCsv() {
  std::mt19937 gen(1);
  std::ostringstream out;
  out << "f0,f1,f2,f3,f4,f5,label\n";
  for (int row = 0; row < 96; ++row) {
    double x[6];
    for (double& v : x) v = static_cast<double>(gen() % 4001) / 1000.0 - 2.0;
    const int label = x[0] + x[1] > 0.5 ? 0 : (x[2] - x[3] > 0 ? 1 : 2);
    for (double v : x) out << v << ",";
    out << label << "\n";
  }
  return out.str();
}

// MLPClassifier on train.csv, batches of 4, 2 epochs on one device unless
// trainer.devices says otherwise: 12 optimizer steps an epoch on 2 ranks, 6
// on 4. A run's checkpoint is
// <default_root_dir>/lightning_logs/version_0/checkpoints/final.ckpt.
constexpr const char* kConfig = R"(seed_everything: 7
trainer:
  devices: 1
  max_epochs: 2
  enable_progress_bar: false
  enable_model_summary: false
  num_sanity_val_steps: 0
  log_every_n_steps: 1
  callbacks:
    - {class_path: ModelCheckpoint, init_args: {filename: final}}
model:
  class_path: MLPClassifier
  init_args: {hidden: [13, 7], dropout: 0.0, lr: 0.01}
data:
  class_path: CSVDataModule
  init_args: {train_file: train.csv, test_file: train.csv, val_split: 0.0, batch_size: 4}
)";

constexpr const char* kClassPath = "lightning_habana.pytorch.strategies.HPUDeepSpeedStrategy";

// Parameters differ by at most this after the same steps on another strategy.
bool close(float expected, float actual) { return std::fabs(expected - actual) <= 1e-6f + 1e-5f * std::fabs(expected); }

// Every "model.*" tensor of `expected` is in `actual` (named rename(name)
// there) and holds the same values within close().
void expectSameWeights(const Checkpoint& expected, const Checkpoint& actual, const std::string& what,
                       const std::function<std::string(const std::string&)>& rename = {}) {
  int tensors = 0;
  for (const auto& e : expected.tensors) {
    if (!e.name.starts_with("model.")) continue;
    ++tensors;
    const std::string name = rename ? rename(e.name) : e.name;
    const auto* a = actual.find(name);
    ASSERT_NE(a, nullptr) << what << ": no " << name;
    ASSERT_EQ(a->values.size(), e.values.size()) << what << ": " << name;
    float worst = 0;
    std::size_t at = 0;
    for (std::size_t i = 0; i < e.values.size(); ++i)
      if (!close(e.values[i], a->values[i]) && std::fabs(e.values[i] - a->values[i]) > worst) {
        worst = std::fabs(e.values[i] - a->values[i]);
        at = i;
      }
    EXPECT_EQ(worst, 0.0f) << what << ": " << name << "[" << at << "] is " << a->values[at] << ", expected "
                           << e.values[at];
  }
  EXPECT_GT(tensors, 0) << what;
}

// The run exited with `code` and said `message` on stderr.
void expectFailure(const RunResult& r, int code, const std::string& message) {
  EXPECT_EQ(r.exit_code, code) << r.describe();
  EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
}

// Processes whose working directory is `dir`: what a run left behind.
int processesIn(const std::filesystem::path& dir) {
  const auto target = std::filesystem::canonical(dir);
  int n = 0;
  std::error_code ec;
  for (const auto& p : std::filesystem::directory_iterator("/proc", ec)) {
    std::error_code link_ec;
    const auto cwd = std::filesystem::read_symlink(p.path() / "cwd", link_ec);
    if (!link_ec && cwd == target) ++n;
  }
  return n;
}

// The last value logged in `column` (which must have one).
double lastValue(const CsvTable& table, const std::string& column) {
  const auto cells = table.column(column);
  for (auto it = cells.rbegin(); it != cells.rend(); ++it)
    if (!it->empty()) return std::stod(*it);
  throw std::out_of_range("metrics.csv has no value of " + column);
}

class DeepSpeedTest : public HpuTrainTest {
 protected:
  void SetUp() override {
    write("train.csv", trainCsv());
    write("mlp.yaml", kConfig);
  }
  // Every rank of every run has ended, the failed ones too.
  void TearDown() override { EXPECT_EQ(processesIn(dir()), 0); }

  // `subcommand -c mlp.yaml [-c extra.yaml] --trainer.default_root_dir=<root> args...`.
  RunResult runIn(const std::string& subcommand, const std::string& root, const std::vector<std::string>& args,
                  const std::string& extra_config = "") {
    std::vector<std::string> full{subcommand, "-c", "mlp.yaml"};
    if (!extra_config.empty()) full.insert(full.end(), {"-c", write(root + ".yaml", extra_config)});
    full.push_back("--trainer.default_root_dir=" + root);
    full.insert(full.end(), args.begin(), args.end());
    return run(full);
  }
  // A fit that must succeed.
  RunResult fit(const std::string& root, const std::vector<std::string>& args, const std::string& extra_config = "") {
    RunResult r = runIn("fit", root, args, extra_config);
    EXPECT_EQ(r.exit_code, 0) << root << ": " << r.describe();
    return r;
  }
  static std::string checkpointOf(const std::string& root) {
    return root + "/lightning_logs/version_0/checkpoints/final.ckpt";
  }
  Checkpoint checkpoint(const std::string& root) const { return readCheckpoint(dir() / checkpointOf(root)); }
  CsvTable metricsOf(const std::string& root) const {
    return readCsv(dir() / root / "lightning_logs/version_0/metrics.csv");
  }
};

// The strategy names of the registry, each with the ZeRO settings rank 0
// reports; all train to hpu_parallel's weights.
TEST_F(DeepSpeedTest, EveryStrategyNameTrainsToTheWeightsOfHpuParallelOnTwoRanks) {
  env()["HPU_LOG_LEVEL"] = "info";
  fit("parallel", {"--trainer.devices=2", "--trainer.strategy=hpu_parallel"});
  const Checkpoint reference = checkpoint("parallel");
  EXPECT_EQ(reference.meta("global_step"), "24");
  const std::pair<const char*, const char*> names[] = {
      {"hpu_deepspeed", "ZeRO stage 2;"},
      {"hpu_deepspeed_stage_1", "ZeRO stage 1;"},
      {"hpu_deepspeed_stage_2", "ZeRO stage 2;"},
      {"hpu_deepspeed_stage_2_offload", "ZeRO stage 2, optimizer offloaded;"},
      {"hpu_deepspeed_stage_3", "ZeRO stage 3;"},
      {"hpu_deepspeed_stage_3_offload", "ZeRO stage 3, optimizer offloaded, parameters offloaded;"},
  };
  for (const auto& [name, settings] : names) {
    const RunResult r = fit(name, {"--trainer.devices=2", std::string("--trainer.strategy=") + name});
    EXPECT_NE(r.err.find(std::string("[rank 0] info: HPUDeepSpeedStrategy: ") + settings +
                         " train_batch_size 8 = micro 4 x accumulation 1 x world 2"),
              std::string::npos)
        << name << ": " << r.err;
    const Checkpoint c = checkpoint(name);
    EXPECT_EQ(c.meta("global_step"), "24") << name;
    expectSameWeights(reference, c, name);
  }
}

// The lightning_habana class path with init_args, and buckets of at most 50
// elements (zero_optimization.reduce_bucket_size), so that shards are uneven
// and several buckets are gathered and reduce-scattered.
TEST_F(DeepSpeedTest, EveryStageTrainsToTheWeightsOfHpuParallelOnFourRanks) {
  fit("parallel", {"--trainer.devices=4", "--trainer.strategy=hpu_parallel"});
  const Checkpoint reference = checkpoint("parallel");
  EXPECT_EQ(reference.meta("global_step"), "12");
  const std::vector<std::vector<std::string>> variants = {
      {"--trainer.strategy.stage=1"},
      {"--trainer.strategy.stage=2"},
      {"--trainer.strategy.stage=2", "--trainer.strategy.offload_optimizer=true"},
      {"--trainer.strategy.stage=3"},
      {"--trainer.strategy.stage=3", "--trainer.strategy.offload_optimizer=true",
       "--trainer.strategy.offload_parameters=true"},
  };
  for (std::size_t v = 0; v < variants.size(); ++v) {
    const std::string root = "zero" + std::to_string(v);
    std::vector<std::string> args{"--trainer.devices=4", std::string("--trainer.strategy=") + kClassPath,
                                  "--trainer.strategy.config={zero_optimization: {reduce_bucket_size: 50}}"};
    args.insert(args.end(), variants[v].begin(), variants[v].end());
    fit(root, args);
    expectSameWeights(reference, checkpoint(root), root + " (" + variants[v].back() + ")");
  }
}

// DeepSpeed's bf16 mode holds the model in bf16: ZeRO-3's parameters are
// gathered in bf16, and gradients reduced in bf16 unless
// communication_data_type asks for fp32. The collectives' dtypes in the
// HPUProfiler trace say which; the step count is the same either way.
TEST_F(DeepSpeedTest, Bf16ModeCommunicatesInBf16) {
  const auto dtypes = [&](const std::string& root) {
    std::map<std::string, std::set<std::string>> out;  // collective -> dtypes
    std::ifstream in(dir() / root / "traces/rank0-fit.pt.trace.json");
    const auto trace = nlohmann::json::parse(in);
    for (const auto& e : trace["traceEvents"])
      if (e["ph"] == "X" && e["tid"] == 2) out[e["name"]].insert(e["args"]["dtype"].get<std::string>());

    return out;
  };
  for (const char* wire : {"", "fp32"}) {
    const std::string root = std::string("bf16") + wire;
    std::vector<std::string> args = {"--trainer.devices=2",
                                     std::string("--trainer.strategy=") + kClassPath,
                                     "--trainer.strategy.stage=3",
                                     "--trainer.precision=bf16-mixed",
                                     "--trainer.profiler=HPUProfiler",
                                     "--trainer.profiler.dirpath=" + root + "/traces"};
    if (*wire) args.push_back(std::string("--trainer.strategy.config={communication_data_type: ") + wire + "}");
    fit(root, args);
    EXPECT_EQ(checkpoint(root).meta("global_step"), "24");
    auto seen = dtypes(root);
    EXPECT_EQ(seen["reduce_scatter"], std::set<std::string>{*wire ? "float32" : "bfloat16"}) << root;
    EXPECT_EQ(seen["allgather"], std::set<std::string>{"bfloat16"}) << root;
  }
}

// In bf16 mode every stage steps the same fp32 master weights of the same
// bf16 model on 2 ranks: ZeRO-1/2/3 end with the weights of DeepSpeed
// without ZeRO. The checkpoint holds the bf16 model; each rank's optimizer
// file holds its fp32 master shard beside the Adam state.
TEST_F(DeepSpeedTest, Bf16ModelStepsFp32MastersAlikeOnEveryStage) {
  const std::vector<std::string> bf16{"--trainer.devices=2", std::string("--trainer.strategy=") + kClassPath,
                                      "--trainer.precision=bf16-mixed"};
  auto with = [&](const std::vector<std::string>& more) {
    std::vector<std::string> args = bf16;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  fit("stage0", with({"--trainer.strategy.zero_optimization=false"}));
  const Checkpoint reference = checkpoint("stage0");
  int tensors = 0;
  for (const auto& e : reference.tensors)
    if (e.name.starts_with("model.")) {
      ++tensors;
      EXPECT_EQ(e.dtype, device::DType::kBFloat16) << e.name;
    }
  EXPECT_GT(tensors, 0);
  EXPECT_NE(reference.find("optimizer.master.0"), nullptr) << "stage 0 keeps whole masters in the main file";
  for (const char* stage : {"1", "2", "3"}) {
    const std::string root = std::string("stage") + stage;
    fit(root, with({std::string("--trainer.strategy.stage=") + stage,
                    "--trainer.strategy.config={zero_optimization: {reduce_bucket_size: 50}}"}));
    expectSameWeights(reference, checkpoint(root), root);
    const Checkpoint shard = readCheckpoint(dir() / (checkpointOf(root) + ".rank1"));
    EXPECT_NE(shard.find("optimizer.master.0"), nullptr) << root;
  }
}

// A bf16 model resumed from its sharded checkpoint takes its fp32 masters
// from the optimizer files, not from the bf16 weights: stopped after one
// epoch and resumed, it ends bit for bit where an uninterrupted run does.
TEST_F(DeepSpeedTest, Bf16ModelResumesFromItsMasterWeights) {
  for (const char* stage : {"1", "3"}) {
    const std::vector<std::string> args{"--trainer.devices=2", std::string("--trainer.strategy=") + kClassPath,
                                        "--trainer.precision=bf16-mixed",
                                        std::string("--trainer.strategy.stage=") + stage};
    auto with = [&](const std::string& more) {
      std::vector<std::string> a = args;
      a.push_back(more);
      return a;
    };
    const std::string whole = std::string("whole") + stage, first = std::string("first") + stage,
                      resumed = std::string("resumed") + stage;
    fit(whole, args);
    fit(first, with("--trainer.max_epochs=1"));
    fit(resumed, with("--ckpt_path=" + checkpointOf(first)));
    for (const char* file : {"", ".rank0", ".rank1"}) {
      const Checkpoint a = readCheckpoint(dir() / (checkpointOf(whole) + file));
      const Checkpoint b = readCheckpoint(dir() / (checkpointOf(resumed) + file));
      ASSERT_EQ(a.tensors.size(), b.tensors.size()) << whole << file;
      for (std::size_t i = 0; i < a.tensors.size(); ++i)
        EXPECT_EQ(a.tensors[i].values, b.tensors[i].values) << "stage " << stage << file << " " << a.tensors[i].name;
    }
  }
}

// A Checkpoint layer recomputes its block in backward, with its inputs in
// host memory (cpu_checkpointing), under ZeRO-3 with everything offloaded:
// the same weights as the plain layers under hpu_parallel.
TEST_F(DeepSpeedTest, ActivationCheckpointingUnderZeroThreeKeepsTheWeights) {
  const std::string layers = R"(model:
  class_path: Sequential
  init_args:
    lr: 0.01
    layers:
      - {class_path: Linear, init_args: {out_features: 13}}
      - ReLU
)";
  const std::string block = R"(      - {class_path: Linear, init_args: {out_features: 9}}
      - ReLU
      - {class_path: Linear, init_args: {out_features: 7}}
      - ReLU
)";
  const std::string head = "      - {class_path: Linear, init_args: {out_features: 3}}\n";
  std::string checkpointed = layers + "      - class_path: Checkpoint\n        init_args:\n          layers:\n";
  std::istringstream lines(block);
  for (std::string line; std::getline(lines, line);) checkpointed += "    " + line + "\n";
  checkpointed += head;

  fit("plain", {"--trainer.devices=2", "--trainer.strategy=hpu_parallel"}, layers + block + head);
  fit("checkpointed",
      {"--trainer.devices=2", std::string("--trainer.strategy=") + kClassPath, "--trainer.strategy.stage=3",
       "--trainer.strategy.offload_optimizer=true", "--trainer.strategy.offload_parameters=true",
       "--trainer.strategy.cpu_checkpointing=true"},
      checkpointed);
  // net.2 and net.4 of the plain model are the block's layers 0 and 2 (net.2).
  const std::map<std::string, std::string> modules{
      {"net.0", "net.0"}, {"net.2", "net.2.0"}, {"net.4", "net.2.2"}, {"net.6", "net.3"}};
  expectSameWeights(checkpoint("plain"), checkpoint("checkpointed"), "checkpointed", [&](const std::string& name) {
    const std::size_t leaf = name.rfind('.');
    return "model." + modules.at(name.substr(6, leaf - 6)) + name.substr(leaf);
  });
}

// DeviceStatsMonitor on rank 0 against the ZeRO paper (fp32 weights 4Ψ,
// gradients 4Ψ, Adam state 8Ψ bytes for Ψ parameters, N ranks):
//   stage 0 (hpu_parallel) 16Ψ   stage 1 8Ψ + 8Ψ/N   stage 2 4Ψ + 12Ψ/N
//   stage 3 16Ψ/N   stage 2 + offload_optimizer 4Ψ   stage 3 + offload 0
// and in bf16 mode (bf16 weights 2Ψ, fp32 masters and Adam state 12Ψ;
// stage 1 accumulates fp32 gradients, 4Ψ; stages 2 and 3 keep bf16 shards):
//   stage 1 6Ψ + 12Ψ/N   stage 2 2Ψ + 14Ψ/N   stage 3 16Ψ/N
//   stage 2 + offload_optimizer 2Ψ   stage 3 + offload 0
// (hpu_parallel under bf16-mixed keeps fp32 weights: 16Ψ)
// held between steps (InUse at on_train_batch_start, with the batch), within
// 1% of 16Ψ (shards round up per bucket). The peak (MaxInUse) adds
// activations and the buckets in flight: it must fall with every stage, and
// offload must lower it further. Stages 1 and 2 get buckets of one
// parameter (reduce_bucket_size: 1), so that a single gradient bucket is in
// flight; stage 3 has them by itself (it gathers per module).
struct MemoryCase {
  int world;
  bool bf16;
};

class DeepSpeedMemoryTest : public DeepSpeedTest, public ::testing::WithParamInterface<MemoryCase> {};

TEST_P(DeepSpeedMemoryTest, DeviceMemoryFollowsTheZeroFormulas) {
  const auto [world, bf16] = GetParam();
  // MLP 6 -> 32 -> 32 -> 32 -> 32 -> 3.
  const double psi = (6 * 32 + 32) + 3 * (32 * 32 + 32) + (32 * 3 + 3);
  const double batch_bytes = 4 * 6 * 4 + 4 * 8;  // features (float32) and labels (int64)
  const std::string extra = R"(trainer:
  max_epochs: 1
  limit_train_batches: 3
  enable_checkpointing: false
  callbacks: [DeviceStatsMonitor]
model:
  init_args: {hidden: [32, 32, 32, 32]}
)";
  struct Case {
    std::string name;
    std::vector<std::string> args;
    double predicted;  // bytes held between steps, without the batch
  };
  const double n = world;
  const std::string zero = std::string("--trainer.strategy=") + kClassPath;
  const std::string buckets = "--trainer.strategy.config={zero_optimization: {reduce_bucket_size: 1}}";
  const std::vector<Case> cases = {
      {"stage 0", {"--trainer.strategy=hpu_parallel"}, 16 * psi},
      {"stage 1", {zero, buckets, "--trainer.strategy.stage=1"}, bf16 ? 6 * psi + 12 * psi / n : 8 * psi + 8 * psi / n},
      {"stage 2", {zero, buckets, "--trainer.strategy.stage=2"}, bf16 ? 2 * psi + 14 * psi / n : 4 * psi + 12 * psi / n},
      {"stage 3", {zero, "--trainer.strategy.stage=3"}, 16 * psi / n},
      {"stage 2 offload",
       {zero, buckets, "--trainer.strategy.stage=2", "--trainer.strategy.offload_optimizer=true"},
       bf16 ? 2 * psi : 4 * psi},
      {"stage 3 offload",
       {zero, "--trainer.strategy.stage=3", "--trainer.strategy.offload_optimizer=true",
        "--trainer.strategy.offload_parameters=true"},
       0},
  };
  std::map<std::string, double> peak;
  std::ostringstream table;
  table << "world " << world << (bf16 ? ", bf16" : "") << ", psi " << psi
        << ": stage, InUse between steps (predicted), MaxInUse\n";
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const std::string root = "memory" + std::to_string(i);
    std::vector<std::string> args{"--trainer.devices=" + std::to_string(world)};
    if (bf16) args.push_back("--trainer.precision=bf16-mixed");
    args.insert(args.end(), c.args.begin(), c.args.end());
    fit(root, args, extra);
    const CsvTable m = metricsOf(root);
    const double held = lastValue(m, "DeviceStatsMonitor.on_train_batch_start/InUse");
    peak[c.name] = lastValue(m, "DeviceStatsMonitor.on_train_batch_end/MaxInUse");
    table << "  " << c.name << ": " << held << " (" << c.predicted + batch_bytes << "), " << peak[c.name] << "\n";
    EXPECT_NEAR(held, c.predicted + batch_bytes, 0.01 * 16 * psi) << c.name;
  }
  EXPECT_GT(peak["stage 0"], peak["stage 1"]) << table.str();
  EXPECT_GT(peak["stage 1"], peak["stage 2"]) << table.str();
  EXPECT_GT(peak["stage 2"], peak["stage 3"]) << table.str();
  EXPECT_GT(peak["stage 2"], peak["stage 2 offload"]) << table.str();
  EXPECT_GT(peak["stage 3"], peak["stage 3 offload"]) << table.str();
  EXPECT_GT(peak["stage 2 offload"], peak["stage 3 offload"]) << table.str();
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeepSpeedMemoryTest,
                         ::testing::Values(MemoryCase{2, false}, MemoryCase{4, false}, MemoryCase{2, true}),
                         [](const auto& info) {
                           return std::to_string(info.param.world) + "ranks" + (info.param.bf16 ? "Bf16" : "");
                         });

// DeepSpeed's learning rate of WarmupDecayLR at optimizer step t (linear
// warmup): min + (max - min) * gamma, gamma = t / W while t < W, then
// max(0, (T - t) / (T - W)); W = max(2, warmup_num_steps).
double warmupDecayLr(std::int64_t t, double min, double max, std::int64_t warmup, std::int64_t total) {
  const std::int64_t w = std::max<std::int64_t>(2, warmup);
  const double gamma = t < w ? static_cast<double>(t) / static_cast<double>(w)
                             : std::max(0.0, static_cast<double>(total - t) / static_cast<double>(total - w));
  return min + (max - min) * gamma;
}

// The seeds' BF16-optimizer example as a DeepSpeed JSON file named by
// PL_DEEPSPEED_CONFIG_PATH, on 2 ranks with accumulate_grad_batches 2 (8 =
// micro 2 x accumulation 2 x world 2). Its scheduler drives the model's
// optimizer step by step; its optimizer loses to the model's Adam.
TEST_F(DeepSpeedTest, DeepSpeedConfigSetsBatchPrecisionAndScheduleOfTheModelsOptimizer) {
  write("ds_config.json", R"({
  "train_batch_size": 8,
  "bf16": {"enabled": true},
  "fp16": {"enabled": false},
  "train_micro_batch_size_per_gpu": 2,
  "scheduler": {"type": "WarmupDecayLR",
                "params": {"warmup_min_lr": 0.02, "warmup_max_lr": 0.05, "warmup_num_steps": 4,
                           "total_num_steps": 8, "warmup_type": "linear"}},
  "optimizer": {"type": "SGD", "params": {"lr": 0.5}},
  "zero_allow_untested_optimizer": true,
  "zero_optimization": {"stage": 2}
})");
  env()["PL_DEEPSPEED_CONFIG_PATH"] = "ds_config.json";
  env()["HPU_LOG_LEVEL"] = "info";
  const RunResult r = fit(
      "seed", {"--trainer.devices=2", std::string("--trainer.strategy=") + kClassPath,
               "--trainer.strategy.parallel_devices=[hpu, hpu]", "--trainer.accumulate_grad_batches=2",
               "--trainer.max_epochs=1", "--data.init_args.batch_size=2", "--trainer.callbacks+=LearningRateMonitor"});
  EXPECT_NE(r.err.find("ZeRO stage 2; train_batch_size 8 = micro 2 x accumulation 2 x world 2"), std::string::npos)
      << r.err;
  const Checkpoint c = checkpoint("seed");
  EXPECT_EQ(c.meta("precision"), "bf16-mixed");
  EXPECT_EQ(c.meta("global_step"), "12");  // 96 samples / (2 x 2 x 2)
  EXPECT_NE(c.meta("optimizer").find("\"name\":\"Adam\""), std::string::npos) << c.meta("optimizer");
  const CsvTable m = metricsOf("seed");
  EXPECT_THROW(m.column("lr-SGD"), std::out_of_range);
  for (std::int64_t step = 0; step < 12; ++step)
    EXPECT_DOUBLE_EQ(m.valueAt("lr-Adam", step), warmupDecayLr(step, 0.02, 0.05, 4, 8)) << "step " << step;
}

// LightningCLI's optimizer: and lr_scheduler: win over the DeepSpeed
// config's optimizer and scheduler.
TEST_F(DeepSpeedTest, ConfigOptimizerAndSchedulerWinOverTheDeepSpeedConfig) {
  const std::string extra = R"(trainer:
  max_epochs: 1
  callbacks: [{class_path: LearningRateMonitor, init_args: {logging_interval: step}}]
  strategy:
    class_path: HPUDeepSpeedStrategy
    init_args:
      stage: 1
      config:
        optimizer: {type: SGD, params: {lr: 0.5}}
        scheduler: {type: WarmupDecayLR, params: {warmup_max_lr: 0.9, warmup_num_steps: 2, total_num_steps: 4}}
optimizer: {class_path: AdamW, init_args: {lr: 0.003}}
lr_scheduler: {class_path: StepLR, init_args: {step_size: 100}}
)";
  fit("cli", {"--trainer.devices=2"}, extra);
  const CsvTable m = metricsOf("cli");
  for (std::int64_t step = 0; step < 12; ++step) EXPECT_DOUBLE_EQ(m.valueAt("lr-AdamW", step), 0.003) << step;
}

// ZeRO shards only Adam and AdamW unless zero_allow_untested_optimizer says
// otherwise, as DeepSpeed (BoringModel steps with SGD). Without a DeepSpeed
// config, Lightning writes the strategy's init_arg (true by default) into
// the config it makes; a given config says it itself (false by default).
TEST_F(DeepSpeedTest, UntestedOptimizerNeedsZeroAllowUntestedOptimizer) {
  const std::vector<std::string> boring{"fit",
                                        "-c",
                                        boringConfig(),
                                        "--trainer.max_epochs=1",
                                        "--trainer.enable_progress_bar=false",
                                        "--trainer.enable_model_summary=false"};
  const std::string refusal =
      "error: You are using an untested ZeRO Optimizer (SGD). Please add "
      "<\"zero_allow_untested_optimizer\": true> in the configuration file to use it.";
  for (const std::string& off : {std::string("--trainer.strategy.zero_allow_untested_optimizer=false"),
                                 std::string("--trainer.strategy.config={zero_optimization: {stage: 1}}")}) {
    std::vector<std::string> refused = boring;
    refused.insert(refused.end(), {"--trainer.strategy=HPUDeepSpeedStrategy", "--trainer.strategy.stage=1", off});
    expectFailure(run(refused), 2, refusal);
  }

  std::vector<std::string> by_default = boring;
  by_default.push_back("--trainer.strategy=hpu_deepspeed_stage_1");
  const RunResult lightning_default = run(by_default);
  EXPECT_EQ(lightning_default.exit_code, 0) << lightning_default.describe();

  std::vector<std::string> allowed = boring;
  allowed.insert(allowed.end(), {"--trainer.strategy=HPUDeepSpeedStrategy", "--trainer.strategy.stage=1",
                                 "--trainer.strategy.config={zero_allow_untested_optimizer: true}"});
  const RunResult ok = run(allowed);
  EXPECT_EQ(ok.exit_code, 0) << ok.describe();
}

// A broken DeepSpeed config is refused with DeepSpeed's message (the file
// named) or the unsupported key named, and parallel_devices must list
// trainer.devices devices: all by the process the user started, before it
// starts any rank (no line names a rank; TearDown: none is left running).
TEST_F(DeepSpeedTest, BrokenDeepSpeedConfigIsRefusedBeforeAnyRankStarts) {
  const auto expectRefusal = [](const RunResult& r, int code, const std::string& message) {
    expectFailure(r, code, message);
    EXPECT_EQ(r.err.find("[rank "), std::string::npos) << r.err;
  };
  write("ds_config.json", R"({"train_batch_size": 10, "train_micro_batch_size_per_gpu": 4})");
  expectRefusal(runIn("fit", "batch",
                      {"--trainer.devices=2", std::string("--trainer.strategy=") + kClassPath,
                       "--trainer.strategy.config=ds_config.json"}),
                2,
                "error: ds_config.json: Check batch related parameters. train_batch_size is not equal to "
                "micro_batch_per_gpu * gradient_acc_step * world_size 10 != 4 * 1 * 2");
  expectRefusal(runIn("fit", "key",
                      {"--trainer.devices=2", std::string("--trainer.strategy=") + kClassPath,
                       "--trainer.strategy.config={zero_optimization: {stage: 3, stage3_prefetch_bucket_size: 5e7}}"}),
                2,
                "error: trainer.strategy.init_args.config: DeepSpeed config key "
                "'zero_optimization.stage3_prefetch_bucket_size' is not supported by hpu-train");
  expectRefusal(runIn("fit", "devices",
                      {"--trainer.devices=2", std::string("--trainer.strategy=") + kClassPath,
                       "--trainer.strategy.parallel_devices=[hpu, hpu, hpu]"}),
                2, "error: trainer.strategy.init_args.parallel_devices lists 3 devices but trainer.devices is 2");
  expectRefusal(runIn("fit", "accumulation",
                      {"--trainer.devices=2", std::string("--trainer.strategy=") + kClassPath,
                       "--trainer.strategy.config={gradient_accumulation_steps: 4}", "--trainer.accumulate_grad_batches=2"}),
                2,
                "error: trainer.accumulate_grad_batches=2 but the DeepSpeed config accumulates 4 "
                "(gradient_accumulation_steps, or train_batch_size / (micro x world)); set one of them");
}

// Stage 2 on 2 ranks, buckets of at most 50 elements: a run stopped after
// one epoch and resumed from its sharded checkpoint ends exactly where an
// uninterrupted run does; the consolidated checkpoint resumes with
// hpu_parallel (one bucket) to the same weights, with hpu_single, and tests
// as the sharded one does.
TEST_F(DeepSpeedTest, ShardedCheckpointResumesAndConsolidates) {
  const std::vector<std::string> zero2{"--trainer.devices=2", std::string("--trainer.strategy=") + kClassPath,
                                       "--trainer.strategy.stage=2",
                                       "--trainer.strategy.config={zero_optimization: {reduce_bucket_size: 50}}"};
  auto with = [](std::vector<std::string> args, const std::vector<std::string>& more) {
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  fit("whole", zero2);
  fit("first", with(zero2, {"--trainer.max_epochs=1"}));
  const std::string saved = checkpointOf("first");
  EXPECT_EQ(fileNames(dir() / "first/lightning_logs/version_0/checkpoints"),
            (std::vector<std::string>{"final.ckpt", "final.ckpt.rank0", "final.ckpt.rank1"}));

  fit("resumed", with(zero2, {"--ckpt_path=" + saved}));
  expectSameWeights(checkpoint("whole"), checkpoint("resumed"), "resumed");
  for (const char* rank : {".rank0", ".rank1"}) {
    const Checkpoint whole = readCheckpoint(dir() / (checkpointOf("whole") + rank));
    const Checkpoint resumed = readCheckpoint(dir() / (checkpointOf("resumed") + rank));
    ASSERT_EQ(whole.tensors.size(), resumed.tensors.size());
    for (std::size_t i = 0; i < whole.tensors.size(); ++i)
      EXPECT_EQ(whole.tensors[i].values, resumed.tensors[i].values) << rank << " " << whole.tensors[i].name;
  }

  expectFailure(runIn("fit", "four",
                      {"--trainer.devices=4", std::string("--trainer.strategy=") + kClassPath, "--ckpt_path=" + saved}),
                1,
                saved +
                    ": its optimizer state is sharded over 2 ranks; resume it with the same ZeRO world size, or "
                    "consolidate it first: hpu-train consolidate " +
                    saved + " <output.ckpt>");

  const RunResult merged = run({"consolidate", saved, "merged.ckpt"});
  ASSERT_EQ(merged.exit_code, 0) << merged.describe();
  const Checkpoint consolidated = readCheckpoint(dir() / "merged.ckpt");
  EXPECT_EQ(consolidated.metadata.count("sharded_optimizer"), 0u);
  expectSameWeights(readCheckpoint(dir() / saved), consolidated, "consolidated");

  fit("parallel", {"--trainer.devices=2", "--trainer.strategy=hpu_parallel", "--ckpt_path=merged.ckpt"});
  expectSameWeights(checkpoint("whole"), checkpoint("parallel"), "hpu_parallel from the consolidated checkpoint");
  fit("single", {"--trainer.strategy=hpu_single", "--ckpt_path=merged.ckpt"});
  EXPECT_EQ(checkpoint("single").meta("global_step"), "36");  // 12 on 2 ranks, then 24 on one

  const RunResult tested_merged = runIn("test", "test_merged", {"--ckpt_path=merged.ckpt"});
  ASSERT_EQ(tested_merged.exit_code, 0) << tested_merged.describe();
  const RunResult tested_sharded = runIn("test", "test_sharded", {"--ckpt_path=" + saved});
  ASSERT_EQ(tested_sharded.exit_code, 0) << tested_sharded.describe();
  EXPECT_EQ(lastValue(metricsOf("test_merged"), "test_loss"), lastValue(metricsOf("test_sharded"), "test_loss"));
}

// ------------------------------------------------------------------ FSDP

constexpr const char* kFsdpClassPath = "lightning_habana.pytorch.strategies.HPUFSDPStrategy";

// Every loss rank 0 logged, as written.
std::vector<std::string> lossesOf(const CsvTable& metrics) { return metrics.column("train_loss"); }

// The same step, optimizer and tensors (model and optimizer state), bit for bit.
void expectSameTensors(Checkpoint got, Checkpoint want, const std::string& what) {
  for (const char* key : {"epoch", "global_step", "optimizer"}) EXPECT_EQ(got.meta(key), want.meta(key)) << what << ": " << key;
  EXPECT_GT(std::count_if(got.tensors.begin(), got.tensors.end(),
                          [](const auto& t) { return t.name.starts_with("optimizer."); }),
            0)
      << what;
  got.metadata.clear();
  want.metadata.clear();
  EXPECT_TRUE(core::checkpoint::encodeSafetensors(got) == core::checkpoint::encodeSafetensors(want))
      << what << ": the tensors differ";
}

// FULL_SHARD is ZeRO-3, SHARD_GRAD_OP ZeRO-2, NO_SHARD plain data parallel:
// the same losses, weights and optimizer state (a full state dict holds the
// whole state in one file, as `consolidate` makes of ZeRO's shards); a
// sharded one consolidates to the full one, and a full one resumes.
TEST_F(DeepSpeedTest, FsdpShardingStrategiesTrainAsTheirZeroStagesOnTwoRanks) {
  env()["HPU_LOG_LEVEL"] = "info";
  const auto consolidated = [&](const std::string& root) {
    const std::string out = root + "-merged.ckpt";
    const RunResult r = run({"consolidate", checkpointOf(root), out});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    return readCheckpoint(dir() / out);
  };
  fit("ds3", {"--trainer.devices=2", "--trainer.strategy=hpu_deepspeed_stage_3"});
  fit("ds2", {"--trainer.devices=2", "--trainer.strategy=hpu_deepspeed_stage_2"});
  fit("parallel", {"--trainer.devices=2", "--trainer.strategy=hpu_parallel"});

  const RunResult full = fit("fsdp", {"--trainer.devices=2", "--trainer.strategy=fsdp"});
  EXPECT_NE(full.err.find("warning: command line: trainer.strategy: 'fsdp' runs as hpu_fsdp (lightning-habana's name "
                          "for it)"),
            std::string::npos)
      << full.err;
  EXPECT_NE(full.err.find("[rank 0] info: HPUFSDPStrategy: sharding_strategy FULL_SHARD (ZeRO stage 3), "
                          "state_dict_type full"),
            std::string::npos)
      << full.err;
  EXPECT_EQ(fileNames(dir() / "fsdp/lightning_logs/version_0/checkpoints"), std::vector<std::string>{"final.ckpt"});
  expectSameTensors(checkpoint("fsdp"), consolidated("ds3"), "FULL_SHARD");
  EXPECT_EQ(lossesOf(metricsOf("fsdp")), lossesOf(metricsOf("ds3")));

  fit("grad_op", {"--trainer.devices=2", "--trainer.strategy=lightning.pytorch.strategies.FSDPStrategy",
                  "--trainer.strategy.sharding_strategy=SHARD_GRAD_OP"});
  expectSameTensors(checkpoint("grad_op"), consolidated("ds2"), "SHARD_GRAD_OP");
  EXPECT_EQ(lossesOf(metricsOf("grad_op")), lossesOf(metricsOf("ds2")));

  fit("no_shard", {"--trainer.devices=2", std::string("--trainer.strategy=") + kFsdpClassPath,
                   "--trainer.strategy.sharding_strategy=NO_SHARD"});
  expectSameWeights(checkpoint("parallel"), checkpoint("no_shard"), "NO_SHARD");

  fit("sharded", {"--trainer.devices=2", std::string("--trainer.strategy=") + kFsdpClassPath,
                  "--trainer.strategy.state_dict_type=sharded"});
  EXPECT_EQ(fileNames(dir() / "sharded/lightning_logs/version_0/checkpoints"),
            (std::vector<std::string>{"final.ckpt", "final.ckpt.rank0", "final.ckpt.rank1"}));
  expectSameTensors(consolidated("sharded"), checkpoint("fsdp"), "sharded");

  fit("first", {"--trainer.devices=2", "--trainer.strategy=fsdp", "--trainer.max_epochs=1"});
  fit("resumed", {"--trainer.devices=2", "--trainer.strategy=fsdp", "--ckpt_path=" + checkpointOf("first")});
  expectSameTensors(checkpoint("resumed"), checkpoint("fsdp"), "resumed");
}

// A sharded optimizer state resumes where it is sharded alike: ZeRO-3's
// shards under FSDP's FULL_SHARD (one parameter a bucket both), not ZeRO-2's
// (one bucket) on the same world size.
TEST_F(DeepSpeedTest, ShardedOptimizerStateResumesOnlyWhereItIsShardedAlike) {
  fit("ds3", {"--trainer.devices=2", "--trainer.strategy=hpu_deepspeed_stage_3", "--trainer.max_epochs=1"});
  fit("ds2", {"--trainer.devices=2", "--trainer.strategy=hpu_deepspeed_stage_2", "--trainer.max_epochs=1"});
  const std::vector<std::string> fsdp{"--trainer.devices=2", std::string("--trainer.strategy=") + kFsdpClassPath,
                                      "--trainer.strategy.state_dict_type=sharded"};
  const auto from = [&](const std::string& root) {
    std::vector<std::string> args = fsdp;
    args.push_back("--ckpt_path=" + checkpointOf(root));
    return args;
  };
  fit("whole", fsdp);
  fit("resumed", from("ds3"));
  expectSameWeights(checkpoint("whole"), checkpoint("resumed"), "FULL_SHARD from ZeRO-3's shards");
  const std::string saved = checkpointOf("ds2");
  expectFailure(runIn("fit", "refused", from("ds2")), 1,
                saved + ": its optimizer state is sharded otherwise than this run shards it (another ZeRO stage, "
                        "bucket size or shard groups); resume it with the strategy that saved it, or consolidate it "
                        "first: hpu-train consolidate " + saved + " <output.ckpt>");
}

// fsdp_cpu_offload is ZeRO-3 with the optimizer and parameters offloaded.
TEST_F(DeepSpeedTest, FsdpCpuOffloadTrainsAsZeroThreeOffload) {
  env()["HPU_LOG_LEVEL"] = "info";
  fit("ds3", {"--trainer.devices=2", "--trainer.strategy=hpu_deepspeed_stage_3_offload"});
  const RunResult r = fit("fsdp", {"--trainer.devices=2", "--trainer.strategy=fsdp_cpu_offload"});
  EXPECT_NE(r.err.find("[rank 0] info: HPUFSDPStrategy: sharding_strategy FULL_SHARD (ZeRO stage 3), cpu_offload, "
                       "state_dict_type full"),
            std::string::npos)
      << r.err;
  expectSameWeights(checkpoint("ds3"), checkpoint("fsdp"), "fsdp_cpu_offload");
  EXPECT_EQ(lossesOf(metricsOf("fsdp")), lossesOf(metricsOf("ds3")));
}

// HYBRID_SHARD on a [2, 2] mesh (ZeRO-3 within pairs of ranks, gradients
// averaged across the pairs) and _HYBRID_SHARD_ZERO2 train as hpu_parallel
// on 4 ranks, gradient clipping included (each shard counted once in the
// norm though two ranks hold it).
TEST_F(DeepSpeedTest, FsdpHybridShardTrainsAsHpuParallelOnFourRanks) {
  env()["HPU_LOG_LEVEL"] = "info";
  const std::vector<std::string> clipped{"--trainer.devices=4", "--trainer.gradient_clip_val=0.05"};
  const auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), clipped.begin(), clipped.end());
    return more;
  };
  fit("parallel", with({"--trainer.strategy=hpu_parallel"}));
  for (const char* sharding : {"HYBRID_SHARD", "_HYBRID_SHARD_ZERO2"}) {
    const RunResult r = fit(sharding, with({std::string("--trainer.strategy=") + kFsdpClassPath,
                                            std::string("--trainer.strategy.sharding_strategy=") + sharding,
                                            "--trainer.strategy.device_mesh=[2, 2]"}));
    EXPECT_NE(r.err.find(std::string("[rank 0] info: HPUFSDPStrategy: sharding_strategy ") + sharding +
                         (sharding[0] == 'H' ? " (ZeRO stage 3" : " (ZeRO stage 2") +
                         " within groups of 2 ranks, 2 replicas), state_dict_type full"),
              std::string::npos)
        << r.err;
    expectSameWeights(checkpoint("parallel"), checkpoint(sharding), sharding);
  }
}

// activation_checkpointing_policy recomputes the named layers (more ops,
// the same weights); auto_wrap_policy gathers a unit's parameters together
// (a higher peak than module by module); names of no layer are refused.
TEST_F(DeepSpeedTest, FsdpPoliciesRecomputeAndGroupTheNamedLayers) {
  const std::vector<std::string> base{"--trainer.devices=2", std::string("--trainer.strategy=") + kFsdpClassPath,
                                      "--model.init_args.hidden=[64, 64]", "--trainer.callbacks+=DeviceStatsMonitor"};
  const auto with = [&](const std::string& more) {
    std::vector<std::string> args = base;
    args.push_back(more);
    return args;
  };
  const auto ops = [](const RunResult& r) {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(r.out, m, std::regex("hpu:0 lazy mode: 24 steps, ([0-9]+) ops"))) << r.out;
    return m.empty() ? 0 : std::stoi(m[1]);
  };
  const auto peak = [&](const std::string& root) {
    double most = 0;
    for (const std::string& v : metricsOf(root).column("DeviceStatsMonitor.on_train_batch_end/MaxInUse"))
      if (!v.empty()) most = std::max(most, std::stod(v));
    return most;
  };
  const RunResult plain = fit("plain", base);
  const RunResult recomputed =
      fit("recomputed", with("--trainer.strategy.activation_checkpointing_policy=[torch.nn.Linear]"));
  EXPECT_GT(ops(recomputed), ops(plain));
  expectSameWeights(checkpoint("plain"), checkpoint("recomputed"), "recomputed");
  fit("wrapped", with("--trainer.strategy.auto_wrap_policy=[Sequential]"));
  EXPECT_GT(peak("wrapped"), peak("plain"));
  expectSameWeights(checkpoint("plain"), checkpoint("wrapped"), "wrapped");

  expectFailure(runIn("fit", "unknown", with("--trainer.strategy.activation_checkpointing_policy=[Linear2]")), 2,
                "error: trainer.strategy.init_args.activation_checkpointing_policy: Linear2 is the class of no module "
                "of MLPClassifier; did you mean 'Linear'? (its classes: MLPClassifier, Sequential, Flatten, Linear, "
                "ReLU)");
}

// Keys FSDP has and hpu-train gives no meaning: each refused by name with
// its reason (a config file's with file:line:col), exit 2, before training.
TEST_F(DeepSpeedTest, FsdpKeysWithoutMeaningAreRefusedByName) {
  write("mixed.yaml", R"(trainer:
  strategy:
    class_path: lightning.pytorch.strategies.FSDPStrategy
    init_args:
      mixed_precision: {param_dtype: bfloat16}
)");
  expectFailure(run({"fit", "-c", "mlp.yaml", "-c", "mixed.yaml", "--trainer.devices=2"}), 2,
                "error: mixed.yaml:5:24: trainer.strategy.init_args.mixed_precision: only the default (null) is "
                "supported: hpu-train derives FSDP's mixed precision from trainer.precision, as Lightning's "
                "FSDPPrecision does (bf16-mixed: fp32 parameters, bf16 compute and gradient reduction; bf16-true: "
                "everything bf16); set trainer.precision");
  const std::string prefetch = "hpu-train gathers a unit's parameters when its forward (or backward) starts, one unit "
                               "at a time, without prefetching the next";
  const std::pair<std::vector<std::string>, std::string> refused[] = {
      {{"--trainer.strategy.limit_all_gathers=false"},
       "limit_all_gathers: only the default (true) is supported: " + prefetch},
      {{"--trainer.strategy.forward_prefetch=true"},
       "forward_prefetch: only the default (false) is supported: " + prefetch},
      {{"--trainer.strategy.backward_prefetch=BACKWARD_PRE"},
       "backward_prefetch: only the default (null) is supported: " + prefetch},
      {{"--trainer.strategy.use_orig_params=false"},
       "use_orig_params: only the default (true) is supported: hpu-train's optimizer always steps the original "
       "parameters (by name, in checkpoints too)"},
      {{"--trainer.strategy.sync_module_states=false"},
       "sync_module_states: only the default (true) is supported: hpu-train always starts every rank from rank 0's "
       "parameters and buffers"},
      {{"--trainer.strategy.process_group=intra_node"},
       "process_group: only the default (null) is supported: hpu-train forms the shard groups itself: "
       "sharding_strategy HYBRID_SHARD with device_mesh [replicas, shard size]"},
      {{"--trainer.strategy.timeout=1:00:00"},
       "timeout: only the default (0:30:00) is supported: collectives wait under hpu-train's own deadlines "
       "(HPU_COLLECTIVE_TIMEOUT)"},
      {{"--trainer.strategy.sharding_strategy=HYBRID"},
       "sharding_strategy: 'HYBRID' is not one of FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, "
       "_HYBRID_SHARD_ZERO2"},
      {{"--trainer.strategy.sharding_strategy=NO_SHARD", "--trainer.strategy.cpu_offload=true"},
       "cpu_offload: NO_SHARD keeps no shards to offload (FSDP offloads sharded parameters); use FULL_SHARD or "
       "SHARD_GRAD_OP with cpu_offload, or NO_SHARD without it"},
      {{"--trainer.strategy.device_mesh=[1, 2]"},
       "device_mesh: [replicas, shard size] shapes the groups of HYBRID_SHARD and _HYBRID_SHARD_ZERO2; FULL_SHARD "
       "shards over every rank: leave it null"},
      {{"--trainer.strategy.activation_checkpointing=[Linear]", "--trainer.strategy.activation_checkpointing_policy=[Linear]"},
       "activation_checkpointing: You cannot set both `activation_checkpointing` and "
       "`activation_checkpointing_policy`. Use the latter."},
  };
  for (const auto& [args, message] : refused) {
    std::vector<std::string> full{"--trainer.devices=2", std::string("--trainer.strategy=") + kFsdpClassPath};
    full.insert(full.end(), args.begin(), args.end());
    const RunResult r = runIn("fit", "refused", full);
    expectFailure(r, 2, "error: command line: trainer.strategy.init_args." + message);
    EXPECT_EQ(r.err.find("[rank "), std::string::npos) << r.err;
  }
  expectFailure(runIn("fit", "mesh",
                      {"--trainer.devices=2", std::string("--trainer.strategy=") + kFsdpClassPath,
                       "--trainer.strategy.sharding_strategy=HYBRID_SHARD", "--trainer.strategy.device_mesh=[3, 2]"}),
                2,
                "error: trainer.strategy.init_args.device_mesh: [3, 2] (3 replicas of shard groups of 2 ranks) does "
                "not multiply to the world size 2 (trainer.devices 2 x trainer.num_nodes 1)");
}

}  // namespace
}  // namespace hpu::cli::testing
