// Evaluation on several ranks, as Lightning's DistributedSampler runs it:
// each rank's share of the validation set is padded by repeating samples
// from the start, so every rank runs the same number of batches (and the
// metrics reduced across ranks count the repeated samples) even when the set
// has fewer samples than there are ranks. Ranks that still disagree (a data
// set that differs between nodes) fail at once, naming the ranks and their
// counts, instead of waiting for a collective another rank skips.
// Every run is loopback only and has a hard deadline.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "train_support.h"

namespace hpu::cli::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

// A tiny GPT-2 on random tokens: the validation set is a tenth of
// num_samples, one batch of up to 8 on a single device.
constexpr const char* kGpt2 = R"(seed_everything: 7
trainer:
  max_steps: 1
  enable_progress_bar: false
  enable_model_summary: false
  logger:
    class_path: CSVLogger
    init_args: {version: 0}
model:
  class_path: GPT2LMHeadModel
  init_args: {vocab_size: 64, n_embd: 32, n_layer: 2, n_head: 4, n_positions: 32}
data:
  class_path: RandomTokensDataModule
  init_args: {vocab_size: 64, block_size: 16}
optimizer:
  class_path: AdamW
  init_args: {lr: 0.01}
)";

// Validation losses of one weights file on one device and on several ranks
// agree to float summation order (products of other row counts, means
// grouped differently).
constexpr double kLossRelTolerance = 1e-6;

struct PaddingCase {
  int devices;
  std::int64_t num_samples;  // validation: num_samples / 10 samples
  std::int64_t padded;       // samples repeated to give every rank one
};

class EvaluationPaddingTest : public HpuTrainTest, public ::testing::WithParamInterface<PaddingCase> {
 protected:
  void SetUp() override {
    write("gpt2.yaml", kGpt2);
    // A rank left waiting in a collective fails after this, not after 600 s.
    env()["HPU_COLLECTIVE_TIMEOUT"] = "15s";
  }

  // The val_loss of `root`'s run, logged at `step`.
  double valLoss(const std::string& root, std::int64_t step) const {
    return readCsv(dir() / root / "lightning_logs/version_0/metrics.csv").valueAt("val_loss", step);
  }
};

// The bug: with fewer validation samples than ranks, ranks without a sample
// had no validation batch, skipped the sanity check and validation, and went
// on to training's all-reduce while the others waited in the metric
// reduction until the collective deadline.
TEST_P(EvaluationPaddingTest, EveryRankValidatesThePaddedSet) {
  const PaddingCase c = GetParam();
  const std::int64_t val_samples = c.num_samples / 10;
  ASSERT_LT(val_samples, c.devices) << "some rank has no sample of its own";
  const std::string samples = "--data.init_args.num_samples=" + std::to_string(c.num_samples);
  const RunResult fit = run({"fit", "-c", "gpt2.yaml", samples, "--trainer.devices=" + std::to_string(c.devices),
                             "--trainer.default_root_dir=parallel"});
  ASSERT_FALSE(fit.timed_out);
  ASSERT_EQ(fit.exit_code, 0) << fit.describe();
  ASSERT_LT(fit.wall, 30s) << "waited for a collective deadline";

  // The weights validated after the one step, as the checkpoint holds them.
  const std::vector<std::string> ckpts = fileNames(dir() / "parallel/lightning_logs/version_0/checkpoints");
  ASSERT_EQ(ckpts, std::vector<std::string>{"epoch=0-step=1.ckpt"});
  const std::string ckpt = (dir() / "parallel/lightning_logs/version_0/checkpoints" / ckpts[0]).string();
  const double got = valLoss("parallel", 0);

  // One device on those weights: the mean over the whole set (one batch),
  // and over its first `padded` samples (the ones the last ranks repeat).
  const auto validate = [&](const std::string& root, int devices, std::vector<std::string> extra) {
    std::vector<std::string> args{"validate", "-c", "gpt2.yaml", samples, "--trainer.devices=" + std::to_string(devices),
                                  "--ckpt_path=" + ckpt, "--trainer.default_root_dir=" + root};
    args.insert(args.end(), extra.begin(), extra.end());
    const RunResult r = run(args);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    // Lightning's warning, on several ranks only.
    EXPECT_EQ(r.err.find("During `trainer.validate()`, it is recommended to use `Trainer(devices=1, num_nodes=1)`") !=
                  std::string::npos,
              devices > 1)
        << r.err;
    return valLoss(root, 0);
  };
  const double whole = validate("whole", 1, {});
  const double first = validate("first", 1, {"--data.init_args.batch_size=" + std::to_string(c.padded),
                                             "--trainer.limit_val_batches=1"});
  const double want = (static_cast<double>(val_samples) * whole + static_cast<double>(c.padded) * first) /
                      static_cast<double>(val_samples + c.padded);
  EXPECT_NEAR(got, want, kLossRelTolerance * std::abs(want))
      << c.devices << " ranks, " << val_samples << " validation samples; one device: " << whole << " over all, "
      << first << " over the first " << c.padded;
  // The padding shows: the unpadded mean is another number.
  EXPECT_GT(std::abs(got - whole), 100 * kLossRelTolerance * std::abs(whole));
  // validate on the ranks of the fit pads alike.
  EXPECT_NEAR(validate("again", c.devices, {}), got, kLossRelTolerance * std::abs(got));
}

// 4 ranks, 3 samples: rank 3 repeats sample 0. 8 ranks, 6 samples (the
// reported case): ranks 6 and 7 repeat samples 0 and 1.
INSTANTIATE_TEST_SUITE_P(Ranks, EvaluationPaddingTest,
                         ::testing::Values(PaddingCase{4, 30, 1}, PaddingCase{8, 64, 2}),
                         [](const auto& info) { return std::to_string(info.param.devices) + "ranks"; });

class RanksDisagreeTest : public HpuTrainTest {};

// Two "nodes" (scripts/local-cluster.sh, one device each) that read
// different copies of val.csv: node 0's has 6 rows (3 per rank: 2 batches),
// node 1's 1 (1 per rank once padded: 1 batch; unpadded, rank 1 had none and
// skipped validation). The ranks fail at once with the counts, well before
// the 600 s collective deadline.
TEST_F(RanksDisagreeTest, DifferentValidationSetsFailAtOnceNamingTheRanksAndCounts) {
  const std::string config = R"(seed_everything: 7
trainer:
  max_epochs: 1
  enable_progress_bar: false
  enable_model_summary: false
  logger: false
model:
  class_path: MLPClassifier
  init_args: {hidden: [4], dropout: 0.0}
data:
  class_path: CSVDataModule
  init_args: {train_file: train.csv, val_file: val.csv, batch_size: 2}
)";
  const auto rows = [](int n) {
    std::string csv = "x0,x1,label\n";
    for (int i = 0; i < n; ++i) csv += std::to_string(i) + "," + std::to_string(2 * i % 5) + "," + std::to_string(i % 2) + "\n";
    return csv;
  };
  for (int node : {0, 1}) {
    const std::string d = "node" + std::to_string(node);
    fs::create_directory(dir() / d);
    write(d + "/cfg.yaml", config);
    write(d + "/train.csv", rows(8));
    write(d + "/val.csv", rows(node == 0 ? 6 : 1));
  }
  // Each node runs in its own directory: the same config, its own files.
  write("node.sh", "cd \"node$NODE_RANK\" && exec " + trainBinary() + " \"$@\"\n");
  fs::permissions(dir() / "node.sh", fs::perms::owner_all);
  const RunResult r = runScript("local-cluster.sh",
                                {"--bin", (dir() / "node.sh").string(), "--nodes", "2", "--devices", "1", "--", "fit",
                                 "-c", "cfg.yaml"},
                                60s);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_LT(r.wall, 30s) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("error: the ranks have different numbers of validation batches (rank 0: 2, rank 1: "
                               "1): a rank with fewer would leave the others waiting for collectives it skips. Give "
                               "every rank the same validation data (the same files on every node)"))
      << r.describe();
}

}  // namespace
}  // namespace hpu::cli::testing
