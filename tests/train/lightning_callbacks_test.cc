// Lightning's standard callbacks on the BoringModel run (32 batches an
// epoch): ModelSummary / RichModelSummary tables and max_depth; Timer's stop
// and checkpointed times; GradientAccumulationScheduler's steps per epoch;
// ThroughputMonitor's logged rates (FLOP/s = the model's FLOPs per batch x
// batches/s); OnExceptionCheckpoint's checkpoint of a failed fit.
#include <gmock/gmock.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "train_support.h"

namespace hpu::cli::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

using LightningCallbacksTest = TrainRunTest;

TEST_F(LightningCallbacksTest, ModelSummaryIsTheDefaultAndRichModelSummaryDrawsABoxTable) {
  RunResult r = fitBoring({"--trainer.max_epochs=1", "--trainer.enable_model_summary=true"});
  EXPECT_THAT(r.out, HasSubstr("  | Name  | Type   | Params | Out sizes | Config\n"
                               "------------------------------------------------\n"
                               "0 | layer | Linear | 66     | [1, 2]    | in_features=32, out_features=2, bias=true\n"
                               "------------------------------------------------\n"
                               "66        Trainable params\n0         Non-trainable params\n66        Total params\n"
                               "0.000     Total estimated model params size (MB)\nTotal params: 66\n"));
  r = fitBoring({"--trainer.max_epochs=1", "--trainer.callbacks+=RichModelSummary"});
  EXPECT_THAT(r.out, HasSubstr("┏━━━┳━━━━━━━┳━━━━━━━━┳━━━━━━━━┳"));
  EXPECT_THAT(r.out, HasSubstr("│ 0 │ layer │ Linear │   66   │ [1, 2]    │"));
  EXPECT_THAT(r.out, HasSubstr("Trainable params: 66\nNon-trainable params: 0\nTotal params: 66\n"
                               "Total estimated model params size (MB): 0.000\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("\x1b[")));  // no colour when stdout is not a terminal
  // max_depth 0: no table.
  r = fitBoring({"--trainer.max_epochs=1", "--trainer.callbacks+=ModelSummary", "--trainer.callbacks.max_depth=0"});
  EXPECT_THAT(r.out, Not(HasSubstr("Total params")));
}

TEST_F(LightningCallbacksTest, RichProgressBarDrawsAColouredBarOnATerminalAndPlainLinesElsewhere) {
  const std::vector<std::string> args{"--trainer.max_epochs=1", "--trainer.enable_progress_bar=true",
                                      "--trainer.callbacks+=RichProgressBar"};
  // Not a terminal (a pipe): plain lines, no escape codes.
  const RunResult plain = fitBoring(args);
  EXPECT_THAT(plain.out, HasSubstr("Epoch 0: 100% 32/32 ["));
  EXPECT_THAT(plain.out, Not(HasSubstr("\x1b[")));
  // On a terminal (script(1) gives the run a pseudo-terminal): rich's bar in its colours.
  std::string command = trainBinary() + " fit -c " + boringConfig() + " --trainer.enable_model_summary=false";
  for (const std::string& a : args) command += " " + a;
  const RunResult tty = runProgram("/usr/bin/script", {"-qfec", command, "/dev/null"},
                                   {.cwd = dir(), .env = {{"HPU_LOG_LEVEL", "warn"}, {"TERM", "xterm"}}});
  ASSERT_EQ(tty.exit_code, 0) << tty.describe();
  EXPECT_THAT(tty.out, HasSubstr("\x1b[37mEpoch 0/0\x1b[0m \x1b[38;2;98;6;224m━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━\x1b[38;5;237m"
                                 "\x1b[0m 32/32 \x1b[38;5;245m0:00:0"));
  EXPECT_THAT(tty.out, HasSubstr(" v_num: 1 loss: "));
}

TEST_F(LightningCallbacksTest, TimerStopsAfterItsDurationAndCheckpointsItsTimes) {
  // A zero duration stops after the first step; the epoch then ends cleanly.
  fitBoring({"--trainer.max_epochs=3", "--trainer.callbacks+=Timer", "--trainer.callbacks.duration=00:00:00:00"});
  EXPECT_THAT(fileNames(dir() / "lightning_logs/version_0/checkpoints"), ElementsAre("epoch=0-step=1.ckpt"));
  const auto first = nlohmann::json::parse(
      readCheckpoint(dir() / "lightning_logs/version_0/checkpoints/epoch=0-step=1.ckpt").metadata.at("callbacks"));
  const auto timerState = [](const nlohmann::json& callbacks) {
    return nlohmann::json::parse(callbacks.at("Timer").get<std::string>()).at("time_elapsed");
  };
  const double spent = timerState(first).at("train").get<double>();
  EXPECT_GT(spent, 0.0);
  // The stopped epoch 0 is complete: the resumed run trains epoch 1 whole (interval: epoch) and
  // stops at its end, having counted the time spent before.
  fitBoring({"--trainer.max_epochs=3", "--trainer.callbacks+=Timer", "--trainer.callbacks.duration={seconds: 0}",
             "--trainer.callbacks.interval=epoch", "--ckpt_path",
             (dir() / "lightning_logs/version_0/checkpoints/epoch=0-step=1.ckpt").string()});
  const auto saved = fileNames(dir() / "lightning_logs/version_1/checkpoints");
  ASSERT_THAT(saved, ElementsAre("epoch=1-step=33.ckpt"));
  const auto second = nlohmann::json::parse(
      readCheckpoint(dir() / "lightning_logs/version_1/checkpoints" / saved[0]).metadata.at("callbacks"));
  EXPECT_GT(timerState(second).at("train").get<double>(), spent);
  // A malformed duration is a config error naming the key.
  const RunResult bad = boring("fit", {"--trainer.callbacks+=Timer", "--trainer.callbacks.duration=1:00"});
  EXPECT_EQ(bad.exit_code, 2) << bad.describe();
  EXPECT_THAT(bad.err, HasSubstr("command line: trainer.callbacks[0].init_args.duration: expected \"DD:HH:MM:SS\", got '1:00'"));
}

// The checkpoints of `dir` sorted by name (epoch=0-... to epoch=3-...):
// the last one holds, for every model tensor, the mean of the first three
// (the weights at the start of SWA epochs 1..3 are those saved after 0..2).
void expectLastIsTheAverage(const fs::path& dir) {
  const std::vector<std::string> names = fileNames(dir);
  ASSERT_EQ(names.size(), 4u) << ::testing::PrintToString(names);
  std::vector<core::checkpoint::Checkpoint> c;
  for (const std::string& n : names) c.push_back(readCheckpoint(dir / n));
  for (const char* name : {"model.layer.weight", "model.layer.bias"}) {
    const auto& got = c[3].find(name)->values;
    for (std::size_t k = 0; k < got.size(); ++k) {
      const double mean =
          (double(c[0].find(name)->values[k]) + c[1].find(name)->values[k] + c[2].find(name)->values[k]) / 3;
      ASSERT_NEAR(got[k], mean, 1e-6) << name << "[" << k << "]";
    }
    EXPECT_NE(c[0].find(name)->values, c[2].find(name)->values) << "the weights moved";
  }
}

// StochasticWeightAveraging from epoch 2 of 4 (SWALR in place of StepLR):
// the last checkpoint holds the average; a run resumed from epoch 1's
// checkpoint (SWA's state in it) ends with the same weights; on two devices
// the average follows the same rule.
TEST_F(LightningCallbacksTest, StochasticWeightAveragingSavesTheAverageAndResumesToIt) {
  const std::vector<std::string> swa{"--trainer.max_epochs=4",
                                     "--optimizer=SGD",
                                     "--optimizer.lr=0.1",
                                     "--lr_scheduler=StepLR",
                                     "--lr_scheduler.step_size=1",
                                     "--trainer.callbacks+=StochasticWeightAveraging",
                                     "--trainer.callbacks.swa_lrs=0.05",
                                     "--trainer.callbacks.swa_epoch_start=2",
                                     "--trainer.callbacks+=ModelCheckpoint",
                                     "--trainer.callbacks.save_top_k=-1"};
  fitBoring(swa);
  const fs::path first = dir() / "lightning_logs/version_0/checkpoints";
  expectLastIsTheAverage(first);
  const auto state = nlohmann::json::parse(nlohmann::json::parse(
      readCheckpoint(first / "epoch=1-step=64.ckpt").metadata.at("callbacks")).at("StochasticWeightAveraging").get<std::string>());
  EXPECT_EQ(state.at("n_averaged"), 1);
  EXPECT_EQ(state.at("latest_update_epoch"), 1);
  EXPECT_EQ(state.at("average_model_state").size(), 2u);

  std::vector<std::string> resumed = swa;
  resumed.insert(resumed.end(), {"--ckpt_path", (first / "epoch=1-step=64.ckpt").string()});
  fitBoring(resumed);
  const auto want = readCheckpoint(first / "epoch=3-step=128.ckpt");
  const auto got = readCheckpoint(dir() / "lightning_logs/version_1/checkpoints/epoch=3-step=128.ckpt");
  for (const char* name : {"model.layer.weight", "model.layer.bias"})
    EXPECT_EQ(got.find(name)->values, want.find(name)->values) << name;

  std::vector<std::string> two = swa;
  two.insert(two.end(), {"--trainer.devices=2", "--trainer.default_root_dir=two"});
  fitBoring(two);
  expectLastIsTheAverage(dir() / "two/lightning_logs/version_0/checkpoints");
}

// LearningRateFinder before fit: the plot in the run's log directory, the
// fit's logging from the restored state (the numbers: learning_rate_finder_test).
TEST_F(LightningCallbacksTest, LearningRateFinderPlotsAndSetsTheLr) {
  fitBoring({"--trainer.max_epochs=1", "--trainer.callbacks+=LearningRateFinder",
             "--trainer.callbacks.num_training_steps=30", "--trainer.callbacks.max_lr=10"});
  std::ifstream png(dir() / "lightning_logs/version_0/lr_find.png", std::ios::binary);
  std::string magic(8, '\0');
  png.read(magic.data(), 8);
  EXPECT_EQ(magic, "\x89PNG\r\n\x1a\n");
  // The finder's steps are not the run's: it logs at the steps a plain run does.
  fitBoring({"--trainer.max_epochs=1"});
  EXPECT_EQ(metrics().loggedAt("val_loss"), metrics("lightning_logs/version_1").loggedAt("val_loss"));
}

// BatchSizeFinder before fit under a small device memory (the numbers:
// batch_size_finder_test): Lightning's lines, and the fit that follows runs
// with the size found; a data module without the batch_arg_name is refused.
TEST_F(LightningCallbacksTest, BatchSizeFinderFitsWithTheLargestBatchThatFits) {
  env()["HPU_LOG_LEVEL"] = "info";
  env()["HPU_EMULATOR_MEMORY_LIMIT"] = "6KiB";
  const RunResult r = fitBoring({"--trainer.max_epochs=1", "--trainer.callbacks+=BatchSizeFinder",
                                 "--trainer.callbacks.mode=binsearch", "--trainer.callbacks.margin=0",
                                 "--trainer.num_sanity_val_steps=0", "--trainer.limit_val_batches=0"});
  EXPECT_THAT(r.err, HasSubstr("info: Batch size 32 succeeded, trying batch size 64\n"));
  EXPECT_THAT(r.err, HasSubstr("info: Batch size 37 failed, trying batch size 36\n"));
  EXPECT_THAT(r.err, HasSubstr("info: Finished batch size finder, will continue with full run using batch size 36\n"));
  // 64 samples in batches of 36: two steps.
  EXPECT_THAT(fileNames(dir() / "lightning_logs/version_0/checkpoints"), ElementsAre("epoch=0-step=2.ckpt"));
  const RunResult refused =
      boring("fit", {"--data=BoringDataModule", "--trainer.callbacks+=BatchSizeFinder", "--trainer.max_epochs=1"});
  EXPECT_EQ(refused.exit_code, 2) << refused.describe();
  EXPECT_THAT(refused.err, HasSubstr("BatchSizeFinder: field batch_size not found in the data module BoringDataModule"));
}

TEST_F(LightningCallbacksTest, GradientAccumulationSchedulerChangesStepsPerEpoch) {
  write("schedule.yaml", R"(trainer:
  callbacks:
    - class_path: lightning.pytorch.callbacks.GradientAccumulationScheduler
      init_args: {scheduling: {0: 4, 2: 1}}
)");
  fitBoring({"-c", "schedule.yaml", "--trainer.max_epochs=3"});
  // 32 batches: 8 steps in epochs 0 and 1, 32 in epoch 2.
  EXPECT_THAT(fileNames(dir() / "lightning_logs/version_0/checkpoints"), ElementsAre("epoch=2-step=48.ckpt"));
  const RunResult both = boring("fit", {"-c", "schedule.yaml", "--trainer.accumulate_grad_batches=2"});
  EXPECT_EQ(both.exit_code, 2) << both.describe();
  EXPECT_THAT(both.err, HasSubstr("trainer.accumulate_grad_batches is 2 and trainer.callbacks has a "
                                  "GradientAccumulationScheduler"));
  write("bad.yaml", "trainer:\n  callbacks:\n    - {class_path: GradientAccumulationScheduler, init_args: {scheduling: {0: 0}}}\n");
  const RunResult bad = boring("fit", {"-c", "bad.yaml"});
  EXPECT_EQ(bad.exit_code, 2) << bad.describe();
  EXPECT_THAT(bad.err, HasSubstr("scheduling: the accumulation factor of epoch 0 should be an int > 0"));
}

TEST_F(LightningCallbacksTest, ThroughputMonitorLogsRates) {
  fitBoring({"--trainer.max_epochs=1", "--trainer.log_every_n_steps=8", "--trainer.callbacks+=ThroughputMonitor",
             "--trainer.callbacks.window_size=4"});
  const CsvTable m = metrics();
  EXPECT_THAT(m.loggedAt("train/samples"), ElementsAre("0,7", "0,15", "0,23", "0,31"));
  for (const std::int64_t step : {7, 15, 23, 31}) {
    EXPECT_EQ(m.valueAt("train/batches", step), static_cast<double>(step + 1));
    EXPECT_EQ(m.valueAt("train/samples", step), 2.0 * static_cast<double>(step + 1));  // batches of 2
    const double batches = m.valueAt("train/device/batches_per_sec", step);
    EXPECT_GT(batches, 0);
    EXPECT_NEAR(m.valueAt("train/device/samples_per_sec", step) / batches, 2.0, 1e-9);
    EXPECT_NEAR(m.valueAt("train/samples_per_sec", step), m.valueAt("train/device/samples_per_sec", step), 1e-9);
    // BoringModel reports 6 x 32 x 2 FLOPs per sample.
    EXPECT_NEAR(m.valueAt("train/device/flops_per_sec", step) / batches, 6.0 * 64 * 2, 1e-6);
  }
}

// Lightning's separator joins the parts of each name; batch_size_fn and
// length_fn (Python functions) take only their null.
TEST_F(LightningCallbacksTest, ThroughputMonitorSeparatorNamesTheMetrics) {
  fitBoring({"--trainer.max_epochs=1", "--trainer.log_every_n_steps=16", "--trainer.callbacks+=ThroughputMonitor",
             "--trainer.callbacks.separator=."});
  const CsvTable m = metrics();
  EXPECT_THAT(m.header, ::testing::Contains("train.device.samples_per_sec"));
  EXPECT_THAT(m.header, Not(::testing::Contains("train/samples")));
  EXPECT_EQ(m.valueAt("train.samples", 31), 64.0);
  const RunResult r = boring("fit", {"--trainer.callbacks+=ThroughputMonitor", "--trainer.callbacks.length_fn=len"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("length_fn: only the default (null) is supported"));
}

TEST_F(LightningCallbacksTest, ThroughputMonitorGivesMfuAgainstThePeakOfThePrecision) {
  // Gaudi2 publishes no fp32 peak: no MFU under 32-true; bf16's is 432 TFLOP/s.
  fitBoring({"--trainer.max_epochs=1", "--trainer.log_every_n_steps=16", "--trainer.callbacks+=ThroughputMonitor"});
  EXPECT_THAT(metrics().header, Not(::testing::Contains("train/device/mfu")));
  fitBoring({"--trainer.max_epochs=1", "--trainer.log_every_n_steps=16", "--trainer.precision=bf16-mixed",
             "--trainer.callbacks+=ThroughputMonitor"});
  const CsvTable m = metrics("lightning_logs/version_1");
  EXPECT_NEAR(m.valueAt("train/device/mfu", 31), m.valueAt("train/device/flops_per_sec", 31) / 432e12, 1e-15);
}

TEST_F(LightningCallbacksTest, OnExceptionCheckpointSavesAFailedFit) {
  const RunResult r = boring("fit", {"--trainer.max_epochs=2", "--trainer.callbacks+=OnExceptionCheckpoint",
                                     "--trainer.callbacks.dirpath=rescue", "--trainer.callbacks+=EarlyStopping",
                                     "--trainer.callbacks.monitor=missing_metric"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("Early stopping conditioned on metric `missing_metric`"));
  EXPECT_THAT(fileNames(dir() / "rescue"), ElementsAre("on_exception.ckpt"));
  const auto ckpt = readCheckpoint(dir() / "rescue/on_exception.ckpt");
  EXPECT_EQ(ckpt.metadata.at("global_step"), "32");
}

TEST_F(LightningCallbacksTest, PredictionWriterWritesNumericOutputsAsATensorFile) {
  const RunResult r = boring("predict", {"--trainer.limit_predict_batches=3"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("wrote 6 predictions to ./lightning_logs/version_0/predictions.safetensors\n"));
  // The safetensors layout: an 8-byte little-endian header length, the JSON header, the data.
  const std::string bytes = read("lightning_logs/version_0/predictions.safetensors");
  std::uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  const auto header = nlohmann::json::parse(bytes.substr(8, header_size));
  EXPECT_EQ(header["outputs"]["dtype"], "F32");
  EXPECT_EQ(header["outputs"]["shape"].dump(), "[6,2]");
  EXPECT_EQ(header["prediction"]["dtype"], "I64");
  EXPECT_EQ(header["prediction"]["shape"].dump(), "[6]");
  const std::size_t data = 8 + header_size;
  const CsvTable csv = readCsv(dir() / "lightning_logs/version_0/predictions.csv");
  ASSERT_EQ(csv.rows.size(), 6u);
  const std::size_t outputs_at = data + header["outputs"]["data_offsets"][0].get<std::size_t>();
  const std::size_t prediction_at = data + header["prediction"]["data_offsets"][0].get<std::size_t>();
  for (std::size_t row = 0; row < 6; ++row) {
    for (std::size_t col = 0; col < 2; ++col) {
      float v;
      std::memcpy(&v, bytes.data() + outputs_at + 4 * (row * 2 + col), 4);
      EXPECT_EQ(v, std::stof(csv.column("output_" + std::to_string(col))[row])) << row << "," << col;
    }
    std::int64_t p;
    std::memcpy(&p, bytes.data() + prediction_at + 8 * row, 8);
    EXPECT_EQ(std::to_string(p), csv.column("prediction")[row]);
  }
}

// BackboneFinetuning on the Fashion-MNIST MLP (hidden [32]): the backbone is
// every layer but the output Linear, so the summary counts its 25,120
// parameters as non-trainable; LearningRateMonitor logs one series per
// parameter group once the backbone has its own (Lightning's /pg<i>).
using BackboneFinetuningRunTest = FashionRunTest;

TEST_F(BackboneFinetuningRunTest, FreezesTheMlpBackboneAndLogsEachGroupsLr) {
  const std::string config = fashionConfig();
  const std::vector<std::string> callbacks{"--trainer.callbacks+=BackboneFinetuning",
                                           "--trainer.callbacks.unfreeze_backbone_at_epoch=1",
                                           "--trainer.callbacks.verbose=true",
                                           "--trainer.callbacks+=LearningRateMonitor",
                                           "--trainer.callbacks.logging_interval=epoch"};
  std::vector<std::string> args{"fit", "-c", config, "--trainer.max_epochs=3", "--trainer.enable_model_summary=true"};
  args.insert(args.end(), callbacks.begin(), callbacks.end());
  env()["HPU_LOG_LEVEL"] = "info";
  RunResult r = run(args);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("330       Trainable params\n25.1 K    Non-trainable params\n25.4 K    Total params\n"));
  EXPECT_THAT(r.err + r.out, HasSubstr("Current lr: 0.001, Backbone lr: 0.0001\n"));
  EXPECT_THAT(r.err + r.out, HasSubstr("Current lr: 0.001, Backbone lr: 0.0002\n"));
  const CsvTable m = metrics();
  EXPECT_THAT(m.loggedAt("lr-Adam"), ElementsAre("0,0"));
  EXPECT_THAT(m.loggedAt("lr-Adam/pg1"), ElementsAre("1,4", "2,8"));
  EXPECT_DOUBLE_EQ(m.valueAt("lr-Adam/pg1", 8), 0.001);
  EXPECT_DOUBLE_EQ(m.valueAt("lr-Adam/pg2", 4), 0.0001);
  EXPECT_DOUBLE_EQ(m.valueAt("lr-Adam/pg2", 8), 0.0002);

  // Two devices: frozen parameters get no gradient; their buckets are reduced all the same.
  args.push_back("--trainer.devices=2");
  r = run(args);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_DOUBLE_EQ(metrics("lightning_logs/version_1").valueAt("lr-Adam/pg2", 8), 0.0002);

  // DeepSpeed is refused, in Lightning's words, before anything trains.
  r = run({"fit", "-c", config, "--trainer.strategy=hpu_deepspeed_stage_2", "--trainer.callbacks+=BackboneFinetuning"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("The Finetuning callback does not support running with the DeepSpeed strategy. Choose "
                               "a different strategy or disable the callback."));
}

}  // namespace
}  // namespace hpu::cli::testing
