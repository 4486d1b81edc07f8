// Data-parallel training through the real binary (hpu_parallel, local ranks
// on loopback): N processes with per-rank batch B/N train to the weights one
// device reaches with batch B (same seed and steps, shuffling on, no
// dropout), and their validation metrics, reduced across ranks, are the
// single device's; only rank 0 prints, logs and saves checkpoints and the
// config; a worker that dies makes hpu-train exit with its code.
//
// Launcher-level behaviour (exit codes, signal forwarding, orphans) is tested
// with a stand-in program in tests/comm/launcher_test.cc; here it is the
// trainer's use of it. Every run is loopback only and has a hard deadline
// after which its whole process group is killed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include "hpu/comm/free_port.h"
#include "train_support.h"

namespace hpu::cli::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

// Fashion-MNIST through a ReLU MLP without dropout, trained with SGD and
// momentum for 2 epochs of 3 steps (a fresh permutation each epoch), with 256
// validation samples checked after each epoch. SGD keeps the update linear in
// the gradient, so summation-order differences stay at float rounding (Adam's
// first steps divide by |g| and would magnify them on near-zero gradients).
constexpr const char* kConfig = R"(seed_everything: 7
trainer:
  max_epochs: 2
  limit_train_batches: 3
  num_sanity_val_steps: 0
  enable_progress_bar: false
  enable_model_summary: false
  logger:
    class_path: CSVLogger
    init_args: {version: 0}
  callbacks:
    - class_path: ModelCheckpoint
      init_args: {save_last: true}
model:
  class_path: MLPClassifier
  init_args: {hidden: [64, 32], dropout: 0.0}
data:
  class_path: FashionMNISTDataModule
  init_args: {val_split: 256, shuffle: true}
optimizer:
  class_path: SGD
  init_args: {lr: 0.1, momentum: 0.9}
)";

// The global batch: every run below splits it evenly over its ranks.
constexpr int kGlobalBatch = 64;

// Weights and momentum buffers after 6 steps agree to float summation order:
// the per-rank means averaged by the all-reduce versus one mean over the
// global batch, and GEMMs split over a different number of intra-op threads.
// Observed differences are below 1e-7 absolute (a different shuffling seed
// moves weights by 0.08); the bound leaves 10x room.
constexpr double kWeightAbsTolerance = 1e-6;
constexpr double kWeightRelTolerance = 1e-5;
// Validation means are sums of per-batch means weighted by batch size, in
// another grouping; loss and accuracy agree to a few float ulps.
constexpr double kMetricRelTolerance = 1e-6;

// Regular files under `root`, as paths relative to it.
std::set<std::string> filesUnder(const fs::path& root) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file()) out.insert(fs::relative(e.path(), root).string());
  return out;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream s(text);
  for (std::string line; std::getline(s, line);) out.push_back(line);
  return out;
}

class DataParallelTest : public FashionRunTest {
 protected:
  void SetUp() override {
    FashionRunTest::SetUp();
    write("dp.yaml", kConfig);
  }

  // Fits on `devices` local processes, each with batch kGlobalBatch /
  // devices, into <scratch>/devices_<N>.
  RunResult fit(int devices, std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"fit",
                                  "-c",
                                  "dp.yaml",
                                  "--trainer.devices=" + std::to_string(devices),
                                  "--data.init_args.batch_size=" + std::to_string(kGlobalBatch / devices),
                                  "--trainer.default_root_dir=" + root(devices)};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  }
  static std::string root(int devices) { return "devices_" + std::to_string(devices); }
  fs::path logDir(int devices) const { return dir() / root(devices) / "lightning_logs" / "version_0"; }
};

// Every model.* and optimizer.* tensor of `got` equals `want`'s within the
// weight tolerance; reports the largest difference seen.
void expectSameTensors(const core::checkpoint::Checkpoint& got, const core::checkpoint::Checkpoint& want) {
  std::set<std::string> got_names, want_names;
  for (const auto& t : got.tensors) got_names.insert(t.name);
  for (const auto& t : want.tensors) want_names.insert(t.name);
  EXPECT_EQ(got_names, want_names);
  double max_diff = 0;
  std::string worst;
  int compared = 0;
  for (const auto& w : want.tensors) {
    if (w.name.rfind("model.", 0) != 0 && w.name.rfind("optimizer.", 0) != 0) continue;
    const auto* g = got.find(w.name);
    if (g == nullptr) continue;
    ++compared;
    ASSERT_EQ(g->shape, w.shape) << w.name;
    ASSERT_EQ(g->values.size(), w.values.size()) << w.name;
    for (std::size_t i = 0; i < w.values.size(); ++i) {
      const double diff = std::abs(double(g->values[i]) - double(w.values[i]));
      if (diff > max_diff) {
        max_diff = diff;
        worst = w.name + "[" + std::to_string(i) + "]";
      }
      ASSERT_LE(diff, kWeightAbsTolerance + kWeightRelTolerance * std::abs(double(w.values[i])))
          << w.name << "[" << i << "]: " << g->values[i] << " vs one device's " << w.values[i];
    }
  }
  EXPECT_GE(compared, 6) << "expected the MLP's 3 weights and 3 biases at least";
  std::printf("largest difference from one device: %.3g at %s\n", max_diff, worst.c_str());
}

class DataParallelEquivalence : public DataParallelTest, public ::testing::WithParamInterface<int> {};

TEST_P(DataParallelEquivalence, SameWeightsAndValidationMetricsAsOneDeviceWithTheGlobalBatch) {
  const int devices = GetParam();
  const RunResult single = fit(1);
  ASSERT_EQ(single.exit_code, 0) << single.describe();
  const RunResult parallel = fit(devices);
  ASSERT_EQ(parallel.exit_code, 0) << parallel.describe();

  const auto want = readCheckpoint(logDir(1) / "checkpoints" / "last.ckpt");
  const auto got = readCheckpoint(logDir(devices) / "checkpoints" / "last.ckpt");
  EXPECT_EQ(got.meta("global_step"), "6");
  EXPECT_EQ(got.meta("global_step"), want.meta("global_step"));
  EXPECT_EQ(got.meta("epoch"), want.meta("epoch"));
  expectSameTensors(got, want);

  const CsvTable want_metrics = readCsv(logDir(1) / "metrics.csv");
  const CsvTable got_metrics = readCsv(logDir(devices) / "metrics.csv");
  ASSERT_EQ(want_metrics.loggedAt("val_loss"), (std::vector<std::string>{"0,2", "1,5"}));
  EXPECT_EQ(got_metrics.loggedAt("val_loss"), want_metrics.loggedAt("val_loss"));
  for (const char* metric : {"val_loss", "val_acc"}) {
    for (std::int64_t step : {2, 5}) {
      const double want_value = want_metrics.valueAt(metric, step);
      EXPECT_NEAR(got_metrics.valueAt(metric, step), want_value, kMetricRelTolerance * std::abs(want_value))
          << metric << " at step " << step;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DataParallel, DataParallelEquivalence, ::testing::Values(2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

// predict on 3 ranks writes every rank's predictions, gathered by rank 0 in
// the data set's order, as one device writes them: 3 ranks x 2 batches of
// 10 rows = 60 rows (model_parallel_test checks that padding repeats are
// dropped).
TEST_F(DataParallelTest, PredictWritesEveryRanksRowsInTheDataSetsOrder) {
  ASSERT_EQ(fit(1).exit_code, 0);
  const std::string ckpt = (logDir(1) / "checkpoints" / "last.ckpt").string();
  const auto predict = [&](int devices, const std::string& root, std::int64_t batches) {
    const RunResult r = run({"predict", "-c", "dp.yaml", "--ckpt_path", ckpt, "--trainer.devices=" + std::to_string(devices),
                             "--data.init_args.batch_size=10", "--trainer.limit_predict_batches=" + std::to_string(batches),
                             "--trainer.default_root_dir=" + root});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    return readCsv(dir() / root / "lightning_logs" / "version_0" / "predictions.csv");
  };
  const CsvTable one = predict(1, "p1", 6), three = predict(3, "p3", 2);
  ASSERT_EQ(one.rows.size(), 60u);
  ASSERT_EQ(three.rows.size(), 60u);
  EXPECT_EQ(three.column("index"), one.column("index"));
  EXPECT_EQ(three.column("prediction"), one.column("prediction"));
  for (std::size_t r = 0; r < one.rows.size(); ++r)
    for (std::size_t c = 2; c < one.header.size(); ++c)
      EXPECT_NEAR(std::stod(three.rows[r][c]), std::stod(one.rows[r][c]), 1e-5) << "row " << r << " " << one.header[c];
}

// Under mpirun with HPU_COLLECTIVES=mpi the gradients are averaged by Open
// MPI's allreduce: with 2 ranks a sum has one order, so the weights and
// optimizer state are the own transport's bit for bit.
TEST_F(DataParallelTest, UnderMpirunOpenMpisCollectivesTrainAsTheOwnTransportDoes) {
  if (!fs::exists("/usr/bin/mpirun")) GTEST_SKIP() << "/usr/bin/mpirun is not installed (Debian: openmpi-bin)";
  const RunResult own = fit(2);
  ASSERT_EQ(own.exit_code, 0) << own.describe();
  std::vector<std::string> args{"--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader,tcp",
                                "--mca", "btl_tcp_if_include", "lo", "-np", "2"};
  for (const char* variable : {"MASTER_ADDR", "MASTER_PORT", "HPU_JOB_TOKEN", "HPU_COLLECTIVES", "HPU_LOG_LEVEL"})
    args.insert(args.end(), {"-x", variable});
  args.insert(args.end(), {trainBinary(), "fit", "-c", "dp.yaml", "--trainer.devices=2",
                           "--data.init_args.batch_size=" + std::to_string(kGlobalBatch / 2),
                           "--trainer.default_root_dir=mpi"});
  std::map<std::string, std::string> job = env();
  job.insert({{"PATH", "/usr/bin:/bin"}, {"HOME", dir().string()}, {"MASTER_ADDR", "127.0.0.1"},
              {"MASTER_PORT", std::to_string(comm::pickFreePort("127.0.0.1"))}, {"HPU_JOB_TOKEN", "mpi-training-test-token-01"}, {"HPU_COLLECTIVES", "mpi"}});
  job["HPU_LOG_LEVEL"] = "info";
  const RunResult mpi = runProgram("/usr/bin/mpirun", args, {.cwd = dir(), .env = job, .timeout = 120s});
  ASSERT_EQ(mpi.exit_code, 0) << mpi.describe();
  EXPECT_THAT(mpi.err + mpi.out, HasSubstr("collectives run on Open MPI v"));
  auto got = readCheckpoint(dir() / "mpi" / "lightning_logs" / "version_0" / "checkpoints" / "last.ckpt");
  auto want = readCheckpoint(logDir(2) / "checkpoints" / "last.ckpt");
  EXPECT_EQ(got.meta("global_step"), "6");
  EXPECT_EQ(got.meta("optimizer"), want.meta("optimizer"));
  got.metadata.clear();
  want.metadata.clear();
  EXPECT_TRUE(core::checkpoint::encodeSafetensors(got) == core::checkpoint::encodeSafetensors(want))
      << "weights or optimizer state differ from the own transport's";
}

TEST_F(DataParallelTest, OnlyRankZeroPrintsLogsAndSaves) {
  env()["HPU_LOG_LEVEL"] = "info";
  const std::vector<std::string> chatty{"--trainer.enable_progress_bar=true", "--trainer.enable_model_summary=true"};
  const RunResult single = fit(1, chatty);
  ASSERT_EQ(single.exit_code, 0) << single.describe();
  const RunResult parallel = fit(2, chatty);
  ASSERT_EQ(parallel.exit_code, 0) << parallel.describe();

  // The same files as one device writes (one log version, one set of
  // checkpoints, no per-rank copies), and nothing outside the log directory.
  EXPECT_EQ(filesUnder(dir() / root(2)), filesUnder(dir() / root(1)));
  EXPECT_EQ(filesUnder(dir()).size(), 2 * filesUnder(dir() / root(1)).size() + 1) << "dp.yaml and the two runs";
  EXPECT_EQ(YAML::LoadFile((logDir(2) / "config.yaml").string())["trainer"]["devices"].as<int>(), 2);

  // Progress, the model summary and the device summary once; every log line
  // from rank 0.
  const std::string out = parallel.out;
  const auto count = [&](const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = out.find(what); at != std::string::npos; at = out.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("Epoch 1: 100%"), 1u) << out;
  EXPECT_EQ(count("Trainable params"), 1u) << out;
  EXPECT_EQ(count("lazy mode:"), 1u) << out;
  EXPECT_THAT(out, HasSubstr("hpu:0 lazy mode:"));
  const std::vector<std::string> err = lines(parallel.err);
  EXPECT_FALSE(err.empty());
  for (const std::string& line : err) EXPECT_THAT(line, ::testing::StartsWith("[rank 0] ")) << parallel.err;
  EXPECT_THAT(parallel.err, HasSubstr("HPUParallelStrategy: 2 processes on 1 node(s) joined"));
}

TEST_F(DataParallelTest, KilledWorkerMakesTheJobExitWithItsCode) {
  // Rank 0 stops at once (the launcher aborts its process group), then waits
  // at most HPU_PEER_TIMEOUT for its rendezvous server to see the dead rank go.
  env()["HPU_PEER_TIMEOUT"] = "2s";
  env()["HPU_FAULT"] = "crash,rank=1,step=3";  // SIGKILL, well into the training loop
  const RunResult r = fit(2, {"--trainer.max_epochs=1000000", "--trainer.limit_train_batches=1.0",
                              "--trainer.check_val_every_n_epoch=100000"});
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("rank 1: fault injected at step 3 (HPU_FAULT): crash (SIGKILL)"));
  // Rank 0's own error (its group aborted) follows from it: the report ends
  // with the root cause alone.
  EXPECT_THAT(r.err, ::testing::ContainsRegex("\n\\[rank 1\\] error: local rank 1 \\(pid [0-9]+\\) was killed by "
                                              "signal 9 \\(Killed\\)\n$"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("aborted")));
}

}  // namespace
}  // namespace hpu::cli::testing

namespace hpu::cli::testing {
namespace {

// A convolutional net with batch norm: per-rank batch statistics differ
// from the global batch's unless trainer.sync_batchnorm sums them.
const char* const kBatchNormNet =
    "{class_path: Sequential, init_args: {layers: [{class_path: Conv2d, init_args: {out_channels: 4, kernel_size: 3, "
    "padding: 1}}, BatchNorm2d, ReLU, {class_path: MaxPool2d, init_args: {kernel_size: 4}}, Flatten, "
    "{class_path: Linear, init_args: {out_features: 10}}]}}";

TEST_F(DataParallelTest, SyncBatchnormTrainsAsOneDeviceWithTheGlobalBatch) {
  const std::string model = std::string("--model=") + kBatchNormNet;
  const RunResult single = fit(1, {model});
  ASSERT_EQ(single.exit_code, 0) << single.describe();
  const RunResult synced = fit(2, {model, "--trainer.sync_batchnorm=true"});
  ASSERT_EQ(synced.exit_code, 0) << synced.describe();
  const auto want = readCheckpoint(logDir(1) / "checkpoints" / "last.ckpt");
  expectSameTensors(readCheckpoint(logDir(2) / "checkpoints" / "last.ckpt"), want);
  const core::checkpoint::TensorEntry* mean = want.find("model.net.1.running_mean");
  ASSERT_NE(mean, nullptr) << "the batch norm's running mean is saved";
  // Without it, the ranks normalise by their own half of the batch.
  const RunResult unsynced = run({"fit", "-c", "dp.yaml", model, "--trainer.devices=2",
                                  "--data.init_args.batch_size=" + std::to_string(kGlobalBatch / 2),
                                  "--trainer.default_root_dir=unsynced"});
  ASSERT_EQ(unsynced.exit_code, 0) << unsynced.describe();
  const auto apart = readCheckpoint(dir() / "unsynced/lightning_logs/version_0/checkpoints/last.ckpt");
  double largest = 0;
  for (std::size_t i = 0; i < mean->values.size(); ++i)
    largest = std::max(largest, std::abs(double(apart.find("model.net.1.running_mean")->values[i]) -
                                         double(mean->values[i])));
  EXPECT_GT(largest, 1e-4);
}

}  // namespace
}  // namespace hpu::cli::testing

namespace hpu::cli::testing {
namespace {

// A job's failure is reported once, by the process that started the local
// ranks: the root cause first, with the ranks that share it, and its exit
// code; the errors that only follow from it (a peer lost, an aborted group)
// at debug level. BoringModel on random data: 16 batches per rank on 2.
class FailureReportTest : public TrainRunTest {
 protected:
  void SetUp() override {
    TrainRunTest::SetUp();
    env()["HPU_LOG_LEVEL"] = "warn";
  }
};

TEST_F(FailureReportTest, TheSameConfigErrorOnEveryRankIsReportedOnceFirst) {
  const RunResult r = boring("fit", {"--trainer.devices=2", "--trainer.val_check_interval=20"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(r.err,
            "[rank 0] error: trainer.val_check_interval (20) must be less than or equal to the number of the training "
            "batches (16). If you want to disable validation set trainer.limit_val_batches to 0.0 instead. If you "
            "want to validate based on the total training batches, set trainer.check_val_every_n_epoch=null.\n"
            "[rank 0] error: (the same error on ranks 0-1)\n");
  EXPECT_FALSE(fs::exists(dir() / "lightning_logs" / "version_0" / "checkpoints"));
}

TEST_F(FailureReportTest, AWorkersOwnErrorIsTheRootCauseAndItsCodeTheJobs) {
  env()["HPU_FAULT"] = "error,rank=1,step=3";  // rank 1 throws; rank 0 loses it at its next collective
  const RunResult r = boring("fit", {"--trainer.devices=2", "--trainer.log_every_n_steps=1"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(r.err, "[rank 1] error: rank 1: fault injected at step 3 (HPU_FAULT): error\n");
  // With -v, what followed from it, after it.
  env()["HPU_LOG_LEVEL"] = "debug";
  const RunResult verbose = boring("fit", {"--trainer.devices=2", "--trainer.log_every_n_steps=1",
                                           "--trainer.default_root_dir=verbose"});
  EXPECT_EQ(verbose.exit_code, 1) << verbose.describe();
  const std::size_t cause = verbose.err.find("[rank 1] error: rank 1: fault injected at step 3 (HPU_FAULT): error\n");
  ASSERT_NE(cause, std::string::npos) << verbose.err;
  // Rank 0 hears of it from rank 1's abort or from its launcher seeing the worker exit, whichever comes first.
  EXPECT_THAT(verbose.err.substr(cause),
              ::testing::ContainsRegex("\\[rank 0\\] debug: rank 0 stopped after it: rank 0: [^\n]*(rank 1 aborted: "
                                       "rank 1 failed|local rank 1 \\(pid [0-9]+\\) exited with code 1)"));
}

TEST_F(FailureReportTest, DevicesAutoSaysWhatItResolvedToAndWarnsOfTooFewCores) {
  env()["HPU_LOG_LEVEL"] = "info";
  env()["HPU_EMULATOR_DEVICES"] = "1";
  RunResult r = boring("fit", {"--trainer.devices=auto", "--trainer.max_steps=1", "--trainer.logger=false",
                               "--trainer.enable_checkpointing=false"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("info: trainer.devices=auto: 1 emulated Intel Gaudi 2 device on this node "
                               "(HPU_EMULATOR_DEVICES=1)\n"));
  // More local ranks than cores: a warning, before any rank starts (here the
  // strategy's sizes are refused before the ranks start).
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores == 0 || cores + 1 > 256) GTEST_SKIP() << "cannot ask for more devices than the host's " << cores << " cores";
  const int devices = static_cast<int>(cores) + 1;
  env()["HPU_EMULATOR_DEVICES"] = std::to_string(devices);
  r = boring("fit", {"--trainer.devices=auto", "--trainer.strategy=ModelParallelStrategy",
                     "--trainer.strategy.init_args.data_parallel_size=" + std::to_string(devices + 1)});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  const std::string n = std::to_string(devices);
  EXPECT_EQ(r.err.substr(0, r.err.find("error: ")),
            "info: trainer.devices=auto: " + n + " emulated Intel Gaudi 2 devices on this node (HPU_EMULATOR_DEVICES=" +
                n + ")\nwarning: trainer.devices=auto: " + n + " local ranks on a host with " + std::to_string(cores) +
                " cores; they share the cores and each runs slower than alone (lower trainer.devices, or run on a "
                "larger host)\n");
}

}  // namespace
}  // namespace hpu::cli::testing
