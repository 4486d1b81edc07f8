// The Trainer's loop through the binary, with Lightning's semantics: when
// fit stops (max_epochs, max_steps, max_time, fast_dev_run), how many
// batches each stage runs (limit_*_batches, num_sanity_val_steps), when it
// validates (val_check_interval, check_val_every_n_epoch), when it logs
// (log_every_n_steps) and steps (accumulate_grad_batches); validate, test
// and predict; and bad data files, which fail with the path and exit 1.
//
// BoringModel on RandomDataModule has 32 training batches per epoch; the
// global step after epoch e is 32 (e + 1). Batches run are read from the
// lazy-mode report ("hpu:0 lazy mode: N steps"), which counts every
// training, validation, test and predict batch.
#include <gmock/gmock.h>
#include <spdlog/fmt/fmt.h>

#include <regex>

#include "../core/idx_files.h"
#include "train_support.h"

namespace hpu::cli::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Batches the device ran, from the report at the end of a run.
int deviceSteps(const RunResult& r) {
  std::smatch m;
  if (!std::regex_search(r.out, m, std::regex("hpu:0 lazy mode: ([0-9]+) steps?,"))) {
    ADD_FAILURE() << "no lazy-mode report in " << r.describe();
    return -1;
  }
  return std::stoi(m[1]);
}

class TrainerLoopTest : public TrainRunTest {
 protected:
  std::vector<std::string> checkpoints() const { return fileNames(dir() / "lightning_logs/version_0/checkpoints"); }
};

TEST_F(TrainerLoopTest, MaxEpochsTrainsWholeEpochsLoggingEveryNSteps) {
  const RunResult r = fitBoring({"--trainer.max_epochs=2", "--trainer.log_every_n_steps=8"});
  const CsvTable m = metrics();
  EXPECT_THAT(m.header, ElementsAre("epoch", "step", "train_loss", "val_loss"));
  // Training steps 8, 16, ... are logged at step 7, 15, ... (Lightning counts from 0).
  EXPECT_THAT(m.loggedAt("train_loss"), ElementsAre("0,7", "0,15", "0,23", "0,31", "1,39", "1,47", "1,55", "1,63"));
  EXPECT_THAT(m.loggedAt("val_loss"), ElementsAre("0,31", "1,63"));
  EXPECT_EQ(m.rows.size(), 10u);
  EXPECT_THAT(checkpoints(), ElementsAre("epoch=1-step=64.ckpt"));
  const auto ckpt = readCheckpoint(dir() / "lightning_logs/version_0/checkpoints/epoch=1-step=64.ckpt");
  EXPECT_EQ(ckpt.meta("epoch"), "1");
  EXPECT_EQ(ckpt.meta("global_step"), "64");
  EXPECT_EQ(deviceSteps(r), 2 + 2 * (32 + 32));  // sanity check, then two epochs of training and validation
}

TEST_F(TrainerLoopTest, MaxStepsStopsInsideAnEpochWithoutValidating) {
  // max_epochs unset: max_steps alone decides. Lightning does not validate
  // when max_steps ends an epoch early.
  const RunResult r = fitBoring({"--trainer.max_steps=40", "--trainer.log_every_n_steps=10"});
  const CsvTable m = metrics();
  EXPECT_THAT(m.loggedAt("train_loss"), ElementsAre("0,9", "0,19", "0,29", "1,39"));
  EXPECT_THAT(m.loggedAt("val_loss"), ElementsAre("0,31"));
  EXPECT_THAT(checkpoints(), ElementsAre("epoch=1-step=40.ckpt"));
  EXPECT_EQ(deviceSteps(r), 2 + 32 + 32 + 8);
}

TEST_F(TrainerLoopTest, TheFirstLimitReachedStops) {
  fitBoring({"--trainer.max_epochs=1", "--trainer.max_steps=1000"});
  EXPECT_THAT(checkpoints(), ElementsAre("epoch=0-step=32.ckpt"));
}

TEST_F(TrainerLoopTest, LimitTrainBatchesIsACountOrAFraction) {
  const RunResult count = fitBoring({"--trainer.max_epochs=2", "--trainer.limit_train_batches=5"});
  EXPECT_THAT(checkpoints(), ElementsAre("epoch=1-step=10.ckpt"));
  EXPECT_THAT(metrics().loggedAt("val_loss"), ElementsAre("0,4", "1,9"));  // validation still ends each epoch
  EXPECT_EQ(deviceSteps(count), 2 + 2 * (5 + 32));

  fitBoring({"--trainer.max_epochs=2", "--trainer.limit_train_batches=0.25"});
  EXPECT_THAT(fileNames(dir() / "lightning_logs/version_1/checkpoints"), ElementsAre("epoch=1-step=16.ckpt"));
  EXPECT_THAT(metrics("lightning_logs/version_1").loggedAt("val_loss"), ElementsAre("0,7", "1,15"));
}

TEST_F(TrainerLoopTest, LimitValBatchesAndSanitySteps) {
  const auto steps = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--trainer.max_epochs=1", "--trainer.logger=false", "--trainer.enable_checkpointing=false"});
    return deviceSteps(fitBoring(args));
  };
  EXPECT_EQ(steps({"--trainer.limit_val_batches=3"}), 2 + 32 + 3);
  EXPECT_EQ(steps({"--trainer.limit_val_batches=0.25"}), 2 + 32 + 8);
  EXPECT_EQ(steps({"--trainer.limit_val_batches=3", "--trainer.num_sanity_val_steps=0"}), 32 + 3);
  // All validation batches, as limited; never more than limit_val_batches.
  EXPECT_EQ(steps({"--trainer.limit_val_batches=3", "--trainer.num_sanity_val_steps=-1"}), 3 + 32 + 3);
  EXPECT_EQ(steps({"--trainer.limit_val_batches=1", "--trainer.num_sanity_val_steps=5"}), 1 + 32 + 1);
  EXPECT_EQ(steps({"--trainer.limit_val_batches=0"}), 32);  // no validation, no sanity check either
}

TEST_F(TrainerLoopTest, ValCheckIntervalAsACountOrAFractionOfTheEpoch) {
  fitBoring({"--trainer.max_epochs=1", "--trainer.val_check_interval=8"});
  EXPECT_THAT(metrics().loggedAt("val_loss"), ElementsAre("0,7", "0,15", "0,23", "0,31"));
  fitBoring({"--trainer.max_epochs=1", "--trainer.val_check_interval=0.25"});
  EXPECT_THAT(metrics("lightning_logs/version_1").loggedAt("val_loss"), ElementsAre("0,7", "0,15", "0,23", "0,31"));
  // 0.3 of 32 batches is every 9th batch: Lightning does not add a check at the epoch's end.
  fitBoring({"--trainer.max_epochs=1", "--trainer.val_check_interval=0.3"});
  EXPECT_THAT(metrics("lightning_logs/version_2").loggedAt("val_loss"), ElementsAre("0,8", "0,17", "0,26"));
}

TEST_F(TrainerLoopTest, CheckValEveryNEpochs) {
  fitBoring({"--trainer.max_epochs=4", "--trainer.check_val_every_n_epoch=2"});
  EXPECT_THAT(metrics().loggedAt("val_loss"), ElementsAre("1,63", "3,127"));
}

TEST_F(TrainerLoopTest, WithoutCheckValEveryNEpochTheIntervalCountsBatchesAcrossEpochs) {
  fitBoring({"--trainer.max_epochs=2", "--trainer.check_val_every_n_epoch=null", "--trainer.val_check_interval=20"});
  EXPECT_THAT(metrics().loggedAt("val_loss"), ElementsAre("0,19", "1,39", "1,59"));
}

TEST_F(TrainerLoopTest, AnIntervalLongerThanTheEpochIsRefused) {
  const RunResult r = boring("fit", {"--trainer.max_epochs=1", "--trainer.val_check_interval=40"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(r.err,
            "error: trainer.val_check_interval (40) must be less than or equal to the number of the training batches "
            "(32). If you want to disable validation set trainer.limit_val_batches to 0.0 instead. If you want to "
            "validate based on the total training batches, set trainer.check_val_every_n_epoch=null.\n");
}

TEST_F(TrainerLoopTest, AccumulatedBatchesMakeOneOptimizerStep) {
  fitBoring({"--trainer.max_epochs=1", "--trainer.accumulate_grad_batches=4", "--trainer.log_every_n_steps=2"});
  EXPECT_THAT(checkpoints(), ElementsAre("epoch=0-step=8.ckpt"));
  EXPECT_THAT(metrics().loggedAt("train_loss"), ElementsAre("0,1", "0,3", "0,5", "0,7"));
}

TEST_F(TrainerLoopTest, FastDevRunRunsNBatchesOfTrainingAndValidationWithoutLogsOrCheckpoints) {
  const RunResult three = run({"fit", "-c", boringConfig(), "--trainer.fast_dev_run=3", "--trainer.enable_model_summary=false"});
  ASSERT_EQ(three.exit_code, 0) << three.describe();
  EXPECT_EQ(deviceSteps(three), 3 + 3);
  EXPECT_THAT(three.out, HasSubstr("Epoch 0: 100% 3/3 ["));
  EXPECT_FALSE(std::filesystem::exists(dir() / "lightning_logs"));
  EXPECT_EQ(deviceSteps(fitBoring({"--trainer.fast_dev_run=true"})), 1 + 1);
  EXPECT_FALSE(std::filesystem::exists(dir() / "lightning_logs"));
}

TEST_F(TrainerLoopTest, MaxTimeStopsTraining) {
  // Time is up before the first batch: the sanity check runs, training does not.
  const RunResult none = fitBoring({"--trainer.max_time=00:00:00:00"});
  EXPECT_EQ(deviceSteps(none), 2);
  EXPECT_THAT(checkpoints(), IsEmpty());

  // Unlimited epochs, stopped by the clock after about a second.
  const RunResult timed = fitBoring({"--trainer.max_epochs=-1", "--trainer.max_time={seconds: 1}"});
  EXPECT_GE(timed.wall, std::chrono::seconds(1));
  EXPECT_LT(timed.wall, std::chrono::seconds(30));
  const auto saved = fileNames(dir() / "lightning_logs/version_1/checkpoints");
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_TRUE(std::regex_match(saved[0], std::regex("epoch=[0-9]+-step=[0-9]+\\.ckpt"))) << saved[0];
  EXPECT_GT(std::stoll(readCheckpoint(dir() / "lightning_logs/version_1/checkpoints" / saved[0]).meta("global_step")),
            32);
}

// The table Lightning prints at the end of validate and test.
std::string resultsTable(const std::string& stage, const std::string& metric, double value) {
  const std::string rule(60, '-');
  return fmt::format("{0}\n{1:>22}{2:>30}\n{0}\n{3:>22}{4:>30.10g}\n{0}\n", rule, stage + " metric", "DataLoader 0", metric,
                     value);
}

TEST_F(TrainerLoopTest, ValidateAndTestLogAtStepZeroAndPrintTheResults) {
  const RunResult val = boring("validate", {"--trainer.limit_val_batches=4"});
  ASSERT_EQ(val.exit_code, 0) << val.describe();
  const CsvTable vm = metrics();
  EXPECT_THAT(vm.header, ElementsAre("epoch", "step", "val_loss"));
  EXPECT_THAT(vm.loggedAt("val_loss"), ElementsAre("0,0"));
  EXPECT_THAT(val.out, HasSubstr(resultsTable("Validate", "val_loss", vm.valueAt("val_loss", 0))));
  EXPECT_EQ(deviceSteps(val), 4);

  const RunResult test = boring("test", {"--trainer.limit_test_batches=5"});
  ASSERT_EQ(test.exit_code, 0) << test.describe();
  const CsvTable tm = metrics("lightning_logs/version_1");
  EXPECT_THAT(tm.loggedAt("test_loss"), ElementsAre("0,0"));
  EXPECT_THAT(test.out, HasSubstr(resultsTable("Test", "test_loss", tm.valueAt("test_loss", 0))));
  EXPECT_EQ(deviceSteps(test), 5);
}

TEST_F(TrainerLoopTest, PredictWritesOneRowPerSample) {
  const RunResult r = boring("predict", {"--trainer.limit_predict_batches=0.25"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("wrote 16 predictions to ./lightning_logs/version_0/predictions.csv\n"));
  const CsvTable p = readCsv(dir() / "lightning_logs/version_0/predictions.csv");
  EXPECT_THAT(p.header, ElementsAre("index", "prediction", "output_0", "output_1"));
  ASSERT_EQ(p.rows.size(), 16u);
  for (std::size_t i = 0; i < p.rows.size(); ++i) {
    EXPECT_EQ(p.rows[i][0], std::to_string(i));
    const bool second = std::stod(p.rows[i][3]) > std::stod(p.rows[i][2]);
    EXPECT_EQ(p.rows[i][1], second ? "1" : "0") << "the prediction is the larger output";
  }
}

// ------------------------------------------------------------------ bad data files

// MNIST-format files of 10 images of 4 x 4 pixels in data/, then one of them
// spoiled; fit must stop with exit 1 and say which file and what it expected.
class BadDataTest : public TrainRunTest {
 protected:
  void SetUp() override {
    std::filesystem::create_directory(dir() / "data");
    write("data/train-images-idx3-ubyte", core::data::idxBytes(3, {10, 4, 4}, core::data::idxPattern(160)));
    write("data/train-labels-idx1-ubyte", core::data::idxBytes(1, {10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  }
  RunResult fit() {
    return run({"fit", "--model", "MLPClassifier", "--data", "MNISTDataModule", "--data.data_dir=data",
                "--data.val_split=2", "--trainer.devices=1", "--trainer.max_epochs=1", "--trainer.logger=false",
                "--trainer.enable_checkpointing=false", "--trainer.enable_progress_bar=false",
                "--trainer.enable_model_summary=false"});
  }
};

TEST_F(BadDataTest, TheIntactFilesTrain) {
  const RunResult r = fit();
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(deviceSteps(r), 1 + 1 + 1);  // 8 training and 2 validation samples, batches of 64
}

TEST_F(BadDataTest, ATruncatedFile) {
  write("data/train-images-idx3-ubyte", core::data::idxBytes(3, {10, 4, 4}, core::data::idxPattern(100)));
  const RunResult r = fit();
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(r.err, "error: data/train-images-idx3-ubyte is truncated: the header announces 160 bytes of data, the "
                   "file has 100\n");
}

TEST_F(BadDataTest, ALabelsFileInPlaceOfImages) {
  write("data/train-images-idx3-ubyte", core::data::idxBytes(1, {10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  const RunResult r = fit();
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(r.err, "error: bad IDX magic 0x00000801 in data/train-images-idx3-ubyte: expected 0x00000803 (unsigned "
                   "bytes, 3 dimensions); is it an MNIST-format images file?\n");
}

TEST_F(BadDataTest, ACorruptGzipFile) {
  std::filesystem::remove(dir() / "data/train-labels-idx1-ubyte");
  write("data/train-labels-idx1-ubyte.gz", std::string("\x1f\x8b\x08\x00", 4) + "garbage, not deflate data");
  const RunResult r = fit();
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_THAT(r.err, ::testing::StartsWith("error: data/train-labels-idx1-ubyte.gz is a corrupt gzip file: "));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line, no internals";
}

TEST_F(BadDataTest, MismatchedImagesAndLabels) {
  write("data/train-labels-idx1-ubyte", core::data::idxBytes(1, {9}, {0, 1, 2, 3, 4, 5, 6, 7, 8}));
  const RunResult r = fit();
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(r.err, "error: data/train-images-idx3-ubyte has 10 images but data/train-labels-idx1-ubyte has 9 labels\n");
}

}  // namespace
}  // namespace hpu::cli::testing

// ------------------------------------------------------------------ Lightning 2.4's other Trainer keys

namespace hpu::cli::testing {
namespace {

TEST_F(TrainerLoopTest, OverfitBatchesTrainsAndValidatesOnTheSameFewBatchesInOrder) {
  const RunResult r = fitBoring({"--trainer.max_epochs=2", "--trainer.overfit_batches=2", "--trainer.log_every_n_steps=1"});
  EXPECT_EQ(r.err,
            "warning: You requested to overfit but enabled training dataloader shuffling. We are turning off the "
            "training dataloader shuffling for you.\n");
  const CsvTable m = metrics();
  EXPECT_THAT(m.loggedAt("train_loss"), ElementsAre("0,0", "0,1", "1,2", "1,3"));
  EXPECT_THAT(m.loggedAt("val_loss"), ElementsAre("0,1", "1,3"));
  EXPECT_EQ(deviceSteps(r), 2 + 2 * (2 + 2));  // sanity check of 2, then 2 train and 2 val batches an epoch
  // A fraction of the training set: 8 of 32 batches.
  std::filesystem::remove_all(dir() / "lightning_logs");
  const RunResult f = fitBoring({"--trainer.max_epochs=1", "--trainer.overfit_batches=0.25", "--data.shuffle=false",
                                 "--trainer.log_every_n_steps=1"});
  EXPECT_EQ(f.err, "");  // nothing was shuffled
  EXPECT_EQ(metrics().loggedAt("train_loss").size(), 8u);
}

TEST_F(TrainerLoopTest, BenchmarkIsAcceptedAndChangesNothing) {
  const RunResult plain = fitBoring({"--trainer.max_epochs=1", "--trainer.log_every_n_steps=8"});
  const std::string plain_metrics = read("lightning_logs/version_0/metrics.csv");
  const RunResult bench = fitBoring({"--trainer.max_epochs=1", "--trainer.log_every_n_steps=8", "--trainer.benchmark=true"});
  EXPECT_EQ(read("lightning_logs/version_1/metrics.csv"), plain_metrics);
  EXPECT_EQ(deviceSteps(bench), deviceSteps(plain));
}

TEST_F(TrainerLoopTest, DetectAnomalyNamesTheFirstOpThatProducedNanOrInf) {
  // An lr of 1e38 sends the weights to inf in the first step; the second
  // step's forward is the first to produce a non-finite value.
  const RunResult r = boring("fit", {"--trainer.max_epochs=1", "--trainer.detect_anomaly=true", "--optimizer=SGD",
                                     "--optimizer.lr=1e38", "--trainer.num_sanity_val_steps=0",
                                     "--trainer.log_every_n_steps=8"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(r.err,
            "error: trainer.detect_anomaly: 'linear' produced inf values in the forward pass, the first op of the step "
            "that did\n");
  // Without detection the same run trains on (to a nan loss).
  const RunResult off = boring("fit", {"--trainer.max_epochs=1", "--optimizer=SGD", "--optimizer.lr=1e38",
                                       "--trainer.num_sanity_val_steps=0", "--trainer.log_every_n_steps=8"});
  EXPECT_EQ(off.exit_code, 0) << off.describe();
}

TEST_F(TrainerLoopTest, BarebonesRunsWithoutLoggersCheckpointsOrProgress) {
  env()["HPU_LOG_LEVEL"] = "info";
  const RunResult r = boring("fit", {"--trainer.max_epochs=1", "--trainer.barebones=true"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_FALSE(std::filesystem::exists(dir() / "lightning_logs"));
  EXPECT_FALSE(std::filesystem::exists(dir() / "checkpoints"));
  EXPECT_EQ(r.out.find("Epoch 0"), std::string::npos) << r.out;  // no progress bar
  EXPECT_EQ(r.out.find("Trainable params"), std::string::npos) << r.out;  // no model summary
  EXPECT_THAT(r.err, HasSubstr("info: You are running in `Trainer(barebones=True)` mode."));
  EXPECT_THAT(r.err, HasSubstr("info: `Trainer(barebones=True)` started running. The progress bar is disabled so you "
                               "might want to manually print the progress in your model.\n"));
}

TEST_F(TrainerLoopTest, BarebonesRefusesWhatItDisables) {
  const RunResult r = boring("fit", {"--trainer.barebones=true", "--trainer.enable_checkpointing=true",
                                     "--trainer.logger=true", "--trainer.num_sanity_val_steps=2",
                                     "--trainer.profiler=simple"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(r.err,
            "error: command line: trainer.enable_checkpointing: `Trainer(barebones=True, enable_checkpointing=True)` "
            "was passed. Checkpointing can impact raw speed so it is disabled in barebones mode.\n"
            "error: command line: trainer.logger: `Trainer(barebones=True, logger=True)` was passed. Logging can "
            "impact raw speed so it is disabled in barebones mode.\n"
            "error: command line: trainer.num_sanity_val_steps: `Trainer(barebones=True, num_sanity_val_steps=2)` was "
            "passed. Sanity checking can impact raw speed so it is disabled in barebones mode.\n"
            "error: command line: trainer.profiler: `Trainer(barebones=True, profiler=...)` was passed. Profiling can "
            "impact raw speed so it is disabled in barebones mode.\n");
}

}  // namespace
}  // namespace hpu::cli::testing
