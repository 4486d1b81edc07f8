// Every callback through the binary, with Lightning's semantics: which
// checkpoints ModelCheckpoint keeps under which names, the epoch at which
// EarlyStopping stops, what LearningRateMonitor and DeviceStatsMonitor log
// at which steps, and what the progress bar prints on a pipe and on a
// terminal.
//
// BoringModel on RandomDataModule: 32 training batches per epoch, and a
// validation loss that falls every epoch (SGD, lr 0.1):
//   epoch     0       1       2       3       4       5
//   val_loss  0.6258  0.1913  0.0926  0.0534  0.0215  0.0088
#include <gmock/gmock.h>
#include <spdlog/fmt/fmt.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "train_support.h"

namespace hpu::cli::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr const char* kCheckpoints = "lightning_logs/version_0/checkpoints";

class CallbacksTest : public TrainRunTest {
 protected:
  std::vector<std::string> checkpoints(const std::string& where = kCheckpoints) const { return fileNames(dir() / where); }
  core::checkpoint::Checkpoint checkpoint(const std::string& name) const { return readCheckpoint(dir() / kCheckpoints / name); }
  // The epochs whose validation ran, from metrics.csv ("0", "1", ...).
  std::vector<std::string> validatedEpochs() const {
    std::vector<std::string> epochs;
    for (const std::string& at : metrics().loggedAt("val_loss")) epochs.push_back(at.substr(0, at.find(',')));
    return epochs;
  }
};

// ------------------------------------------------------------------ ModelCheckpoint

TEST_F(CallbacksTest, ModelCheckpointByDefaultKeepsTheNewestEpoch) {
  fitBoring({"--trainer.max_epochs=3"});
  EXPECT_THAT(checkpoints(), ElementsAre("epoch=2-step=96.ckpt"));
  const auto ckpt = checkpoint("epoch=2-step=96.ckpt");
  EXPECT_EQ(ckpt.meta("epoch"), "2");
  EXPECT_EQ(ckpt.meta("global_step"), "96");
  EXPECT_EQ(ckpt.meta("batches_done"), "-1");  // saved at the end of its epoch
  ASSERT_NE(ckpt.find("model.layer.weight"), nullptr);
  EXPECT_EQ(ckpt.find("model.layer.weight")->shape, (std::vector<std::int64_t>{2, 32}));
}

TEST_F(CallbacksTest, ModelCheckpointSaveTopKAllKeepsEveryEpoch) {
  fitBoring({"--trainer.max_epochs=3", "--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.save_top_k=-1"});
  EXPECT_THAT(checkpoints(), ElementsAre("epoch=0-step=32.ckpt", "epoch=1-step=64.ckpt", "epoch=2-step=96.ckpt"));
}

TEST_F(CallbacksTest, ModelCheckpointKeepsTheTopKByTheMonitoredMetric) {
  fitBoring({"--trainer.max_epochs=5", "--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.monitor=val_loss",
             "--trainer.callbacks.save_top_k=2", "--trainer.callbacks.save_last=true"});
  EXPECT_THAT(checkpoints(), ElementsAre("epoch=3-step=128.ckpt", "epoch=4-step=160.ckpt", "last.ckpt"));
  EXPECT_EQ(checkpoint("last.ckpt").meta("global_step"), "160");
  // The state it resumes with names the best file and its score.
  const auto state = nlohmann::json::parse(checkpoint("last.ckpt").meta("callbacks"));
  const auto mc = nlohmann::json::parse(
      state.at("ModelCheckpoint{'monitor': 'val_loss', 'mode': 'min', 'every_n_train_steps': 0, 'every_n_epochs': 1}")
          .get<std::string>());
  EXPECT_EQ(mc.at("best_model_path"), "./" + std::string(kCheckpoints) + "/epoch=4-step=160.ckpt");
  EXPECT_EQ(mc.at("best_model_score").get<double>(), metrics().valueAt("val_loss", 159));
}

TEST_F(CallbacksTest, ModelCheckpointModeMaxKeepsTheHighest) {
  fitBoring({"--trainer.max_epochs=5", "--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.monitor=val_loss",
             "--trainer.callbacks.mode=max", "--trainer.callbacks.save_top_k=2"});
  EXPECT_THAT(checkpoints(), ElementsAre("epoch=0-step=32.ckpt", "epoch=1-step=64.ckpt"));
}

TEST_F(CallbacksTest, ModelCheckpointFilenameTemplatesAndDirpath) {
  fitBoring({"--trainer.max_epochs=2", "--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.dirpath=ckpts",
             "--trainer.callbacks.filename='{epoch}-{val_loss:.3f}'", "--trainer.callbacks.monitor=val_loss",
             "--trainer.callbacks.save_top_k=-1"});
  const CsvTable m = metrics();
  EXPECT_THAT(checkpoints("ckpts"),
              ElementsAre(fmt::format("epoch=0-val_loss={:.3f}.ckpt", m.valueAt("val_loss", 31)),
                          fmt::format("epoch=1-val_loss={:.3f}.ckpt", m.valueAt("val_loss", 63))));
  EXPECT_FALSE(std::filesystem::exists(dir() / kCheckpoints));

  // Lightning's literal template, without the automatic "name=".
  fitBoring({"--trainer.max_epochs=1", "--trainer.callbacks+=ModelCheckpoint",
             "--trainer.callbacks.filename=epoch={epoch}-step={step}", "--trainer.callbacks.auto_insert_metric_name=false"});
  EXPECT_THAT(checkpoints("lightning_logs/version_1/checkpoints"), ElementsAre("epoch=0-step=32.ckpt"));
}

TEST_F(CallbacksTest, ModelCheckpointEveryNEpochsSavesTopKOnThoseAndLastEveryEpoch) {
  fitBoring({"--trainer.max_epochs=5", "--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.every_n_epochs=2",
             "--trainer.callbacks.save_top_k=-1", "--trainer.callbacks.save_last=true"});
  EXPECT_THAT(checkpoints(), ElementsAre("epoch=1-step=64.ckpt", "epoch=3-step=128.ckpt", "last.ckpt"));
  EXPECT_EQ(checkpoint("last.ckpt").meta("global_step"), "160");
}

TEST_F(CallbacksTest, ModelCheckpointEveryNTrainSteps) {
  fitBoring({"--trainer.max_epochs=2", "--trainer.callbacks+=ModelCheckpoint",
             "--trainer.callbacks.every_n_train_steps=10", "--trainer.callbacks.save_top_k=-1",
             "--trainer.callbacks.save_last=true"});
  EXPECT_THAT(checkpoints(), ElementsAre("epoch=0-step=10.ckpt", "epoch=0-step=20.ckpt", "epoch=0-step=30.ckpt",
                                         "epoch=1-step=40.ckpt", "epoch=1-step=50.ckpt", "epoch=1-step=60.ckpt",
                                         "last.ckpt"));
  const auto mid = checkpoint("epoch=1-step=40.ckpt");
  EXPECT_EQ(mid.meta("epoch"), "1");
  EXPECT_EQ(mid.meta("batches_done"), "8");  // 8 of epoch 1's batches were done
  EXPECT_EQ(checkpoint("last.ckpt").meta("global_step"), "64");  // last.ckpt also ends every epoch
}

TEST_F(CallbacksTest, ModelCheckpointSavesAfterValidationWhenItIsNotOncePerEpoch) {
  // Validation every other epoch: the monitored metric exists only then.
  fitBoring({"--trainer.max_epochs=4", "--trainer.check_val_every_n_epoch=2", "--trainer.callbacks+=ModelCheckpoint",
             "--trainer.callbacks.monitor=val_loss", "--trainer.callbacks.save_top_k=-1"});
  EXPECT_THAT(checkpoints(), ElementsAre("epoch=1-step=64.ckpt", "epoch=3-step=128.ckpt"));
  // Validation twice per epoch: a checkpoint after each.
  fitBoring({"--trainer.max_epochs=1", "--trainer.val_check_interval=0.5", "--trainer.callbacks+=ModelCheckpoint",
             "--trainer.callbacks.save_top_k=-1"});
  EXPECT_THAT(checkpoints("lightning_logs/version_1/checkpoints"),
              ElementsAre("epoch=0-step=16.ckpt", "epoch=0-step=32.ckpt"));
}

TEST_F(CallbacksTest, ModelCheckpointWithoutTheMonitoredMetric) {
  // Never validated: a warning per epoch, nothing saved.
  const RunResult none = fitBoring({"--trainer.max_epochs=2", "--trainer.limit_val_batches=0", "--trainer.log_every_n_steps=16",
                                    "--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.monitor=val_loss"});
  const std::string warning =
      "warning: ModelCheckpoint(monitor='val_loss') could not find the monitored key in the returned metrics: "
      "`train_loss`. HINT: Did you call log('val_loss', value) in the LightningModule?; not saving\n";
  EXPECT_EQ(none.err, warning + warning);
  EXPECT_THAT(checkpoints(), IsEmpty());
  // Validated, but the metric was never logged: an error.
  const RunResult typo = boring("fit", {"--trainer.max_epochs=2", "--trainer.log_every_n_steps=16",
                                        "--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.monitor=val_acc"});
  EXPECT_EQ(typo.exit_code, 2) << typo.describe();
  EXPECT_EQ(typo.err,
            "error: ModelCheckpoint(monitor='val_acc') could not find the monitored key in the returned metrics: "
            "`train_loss`, `val_loss`. HINT: Did you call log('val_acc', value) in the LightningModule?\n");
}

// ------------------------------------------------------------------ EarlyStopping

class EarlyStoppingTest : public CallbacksTest {
 protected:
  RunResult fitWith(std::vector<std::string> early_stopping_args, const std::string& max_epochs = "10") {
    std::vector<std::string> args{"--trainer.max_epochs=" + max_epochs, "--trainer.callbacks+=EarlyStopping"};
    for (const std::string& a : early_stopping_args) args.push_back("--trainer.callbacks." + a);
    return fitBoring(args);
  }
};

TEST_F(EarlyStoppingTest, AnImprovingMetricNeverStops) {
  fitWith({"patience=2"}, "6");
  EXPECT_THAT(validatedEpochs(), ElementsAre("0", "1", "2", "3", "4", "5"));
}

TEST_F(EarlyStoppingTest, MinDeltaDecidesWhatCountsAsAnImprovement) {
  // Best 0.6258, then 0.1913; 0.0926 misses it by less than 0.1 (wait 1),
  // 0.0534 does not (best again, wait 0); 0.0215 and 0.0088 do: wait 2, stop.
  env()["HPU_LOG_LEVEL"] = "info";
  const RunResult r = fitWith({"patience=2", "min_delta=0.1"});
  EXPECT_THAT(validatedEpochs(), ElementsAre("0", "1", "2", "3", "4", "5"));
  EXPECT_THAT(checkpoints(), ElementsAre("epoch=5-step=192.ckpt"));
  EXPECT_THAT(r.err, HasSubstr(fmt::format("info: Monitored metric val_loss did not improve in the last 2 records. "
                                           "Best score: {:.3f}. Signaling Trainer to stop.\n",
                                           metrics().valueAt("val_loss", 127))));
}

TEST_F(EarlyStoppingTest, ModeMaxOnAFallingMetricStopsAfterPatienceChecks) {
  fitWith({"patience=3", "mode=max"});
  EXPECT_THAT(validatedEpochs(), ElementsAre("0", "1", "2", "3"));
  EXPECT_THAT(checkpoints(), ElementsAre("epoch=3-step=128.ckpt"));
}

TEST_F(EarlyStoppingTest, StoppingAndDivergenceThresholds) {
  fitWith({"stopping_threshold=0.1"});  // 0.0926 < 0.1 at epoch 2
  EXPECT_THAT(validatedEpochs(), ElementsAre("0", "1", "2"));
  std::filesystem::remove_all(dir() / "lightning_logs");
  fitWith({"divergence_threshold=0.5"});  // 0.6258 > 0.5 at once
  EXPECT_THAT(validatedEpochs(), ElementsAre("0"));
}

TEST_F(EarlyStoppingTest, CheckFiniteStopsOnNaN) {
  // lr 20 makes SGD diverge: the first validation loss is NaN.
  fitBoring({"--trainer.max_epochs=10", "--model.lr=20", "--trainer.callbacks+=EarlyStopping",
             "--trainer.callbacks.patience=3"});
  EXPECT_THAT(metrics().column("val_loss"), ElementsAre("nan"));
  std::filesystem::remove_all(dir() / "lightning_logs");
  // Without check_finite, NaN simply never improves.
  fitBoring({"--trainer.max_epochs=10", "--model.lr=20", "--trainer.callbacks+=EarlyStopping",
             "--trainer.callbacks.patience=3", "--trainer.callbacks.check_finite=false"});
  EXPECT_THAT(validatedEpochs(), ElementsAre("0", "1", "2"));
}

TEST_F(EarlyStoppingTest, StoppingInsideAnEpochEndsItAtOnce) {
  // Validation every 8 batches; mode max stops at the second check (step
  // 15), before batch 16 runs.
  fitBoring({"--trainer.max_epochs=10", "--trainer.val_check_interval=8", "--trainer.callbacks+=EarlyStopping",
             "--trainer.callbacks.patience=1", "--trainer.callbacks.mode=max"});
  EXPECT_THAT(metrics().loggedAt("val_loss"), ElementsAre("0,7", "0,15"));
  EXPECT_THAT(checkpoints(), ElementsAre("epoch=0-step=16.ckpt"));
}

TEST_F(EarlyStoppingTest, AMissingMetricIsAnErrorUnlessNotStrict) {
  const RunResult r = boring("fit", {"--trainer.max_epochs=2", "--trainer.log_every_n_steps=16",
                                     "--trainer.callbacks+=EarlyStopping", "--trainer.callbacks.monitor=val_acc"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(r.err, "error: Early stopping conditioned on metric `val_acc` which is not available. Pass in or modify your "
                   "`EarlyStopping` callback to use any of the following: `train_loss`, `val_loss`\n");
  std::filesystem::remove_all(dir() / "lightning_logs");
  fitWith({"monitor=val_acc", "strict=false"}, "2");
  EXPECT_THAT(validatedEpochs(), ElementsAre("0", "1"));
}

// ------------------------------------------------------------------ LearningRateMonitor

TEST_F(CallbacksTest, LearningRateMonitorWithoutSchedulerLogsAtEpochStartsAndWithTheTrainingMetrics) {
  fitBoring({"--trainer.max_epochs=2", "--trainer.log_every_n_steps=16", "--trainer.callbacks+=LearningRateMonitor"});
  const CsvTable m = metrics();
  EXPECT_THAT(m.loggedAt("lr-SGD"), ElementsAre("0,0", "0,15", "0,31", "1,32", "1,47", "1,63"));
  EXPECT_THAT(m.loggedAt("train_loss"), ElementsAre("0,15", "0,31", "1,47", "1,63"));
  for (const std::string& v : m.column("lr-SGD"))
    if (!v.empty()) {
      EXPECT_EQ(v, "0.1");
    }
}

TEST_F(CallbacksTest, LearningRateMonitorWithoutIntervalFollowsAnEpochScheduler) {
  fitBoring({"--trainer.max_epochs=2", "--trainer.log_every_n_steps=16", "--optimizer=SGD", "--optimizer.lr=0.1",
             "--lr_scheduler=StepLR", "--lr_scheduler.step_size=1", "--trainer.callbacks+=LearningRateMonitor"});
  EXPECT_THAT(metrics().loggedAt("lr-SGD"), ElementsAre("0,0", "1,32"));
}

TEST_F(CallbacksTest, LearningRateMonitorPerStepIgnoresTheSchedulersInterval) {
  fitBoring({"--trainer.max_epochs=1", "--trainer.log_every_n_steps=16", "--optimizer=SGD", "--optimizer.lr=0.1",
             "--lr_scheduler=StepLR", "--lr_scheduler.step_size=1", "--trainer.callbacks+=LearningRateMonitor",
             "--trainer.callbacks.logging_interval=step"});
  EXPECT_THAT(metrics().loggedAt("lr-SGD"), ElementsAre("0,15", "0,31"));
}

TEST_F(CallbacksTest, LearningRateMonitorPerEpochFollowsTheScheduler) {
  fitBoring({"--trainer.max_epochs=3", "--optimizer=SGD", "--optimizer.lr=0.1", "--lr_scheduler=StepLR",
             "--lr_scheduler.step_size=1", "--lr_scheduler.gamma=0.5", "--trainer.callbacks+=LearningRateMonitor",
             "--trainer.callbacks.logging_interval=epoch"});
  const CsvTable m = metrics();
  EXPECT_THAT(m.loggedAt("lr-SGD"), ElementsAre("0,0", "1,32", "2,64"));
  EXPECT_EQ(m.valueAt("lr-SGD", 0), 0.1);
  EXPECT_EQ(m.valueAt("lr-SGD", 32), 0.05);
  EXPECT_EQ(m.valueAt("lr-SGD", 64), 0.025);
}

TEST_F(CallbacksTest, MonitorsNeedALogger) {
  for (const char* monitor : {"LearningRateMonitor", "DeviceStatsMonitor"}) {
    const RunResult r = boring("fit", {"--trainer.max_epochs=1", "--trainer.logger=false",
                                       std::string("--trainer.callbacks+=") + monitor});
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_EQ(r.err, std::string(monitor) == "LearningRateMonitor"
                         ? "error: Cannot use `LearningRateMonitor` callback with `Trainer` that has no logger.\n"
                         : "error: Cannot use `DeviceStatsMonitor` callback with `Trainer(logger=False)`.\n");
  }
}

// ------------------------------------------------------------------ DeviceStatsMonitor

TEST_F(CallbacksTest, DeviceStatsMonitorLogsTheTenDeviceStatistics) {
  env()["HPU_EMULATOR_MEMORY_LIMIT"] = "1GiB";
  fitBoring({"--trainer.max_epochs=1", "--trainer.log_every_n_steps=8", "--trainer.callbacks+=DeviceStatsMonitor"});
  const CsvTable m = metrics();
  const std::vector<std::string> stats{"ActiveAllocs", "InUse",          "Limit",           "MaxAllocSize",
                                       "MaxInUse",     "NumAllocs",      "NumFrees",        "TotalActiveAllocs",
                                       "TotalSystemAllocs", "TotalSystemFrees"};
  std::vector<std::string> expected_header;
  for (const char* hook : {"on_train_batch_end", "on_train_batch_start", "on_validation_batch_end",
                           "on_validation_batch_start"})
    for (const std::string& s : stats) expected_header.push_back(std::string("DeviceStatsMonitor.") + hook + "/" + s);
  expected_header.insert(expected_header.end(), {"epoch", "step", "train_loss", "val_loss"});
  EXPECT_EQ(m.header, expected_header);
  for (const char* hook : {"on_train_batch_start", "on_train_batch_end"})
    EXPECT_THAT(m.loggedAt(std::string("DeviceStatsMonitor.") + hook + "/InUse"),
                ElementsAre("0,7", "0,15", "0,23", "0,31"));
  // Validation batches 8, 16, 24 and 32, at the step of the validation.
  for (const char* hook : {"on_validation_batch_start", "on_validation_batch_end"})
    EXPECT_THAT(m.loggedAt(std::string("DeviceStatsMonitor.") + hook + "/InUse"),
                ElementsAre("0,31", "0,31", "0,31", "0,31"));
  for (const char* hook : {"on_train_batch_start", "on_train_batch_end", "on_validation_batch_end"}) {
    const std::string p = std::string("DeviceStatsMonitor.") + hook + "/";
    const auto column = [&](const std::string& s) {
      std::vector<double> v;
      for (const std::string& cell : m.column(p + s))
        if (!cell.empty()) v.push_back(std::stod(cell));
      return v;
    };
    const auto limit = column("Limit"), in_use = column("InUse"), max_in_use = column("MaxInUse"),
               largest = column("MaxAllocSize"), allocs = column("NumAllocs"), frees = column("NumFrees"),
               active = column("ActiveAllocs"), sys_allocs = column("TotalSystemAllocs"),
               sys_frees = column("TotalSystemFrees"), sys_active = column("TotalActiveAllocs");
    ASSERT_EQ(limit.size(), 4u) << hook;
    for (std::size_t i = 0; i < limit.size(); ++i) {
      SCOPED_TRACE(p + " row " + std::to_string(i));
      EXPECT_EQ(limit[i], 1073741824.0);
      EXPECT_GT(in_use[i], 0);
      EXPECT_LE(in_use[i], max_in_use[i]);
      EXPECT_LE(largest[i], max_in_use[i]);
      EXPECT_EQ(active[i], allocs[i] - frees[i]);
      EXPECT_EQ(sys_active[i], sys_allocs[i] - sys_frees[i]);
      if (i > 0) {
        EXPECT_GT(allocs[i], allocs[i - 1]) << "every batch allocates";
      }
    }
  }
}

TEST_F(CallbacksTest, DeviceStatsMonitorDuringTestLogsByBatch) {
  const RunResult r = boring("test", {"--trainer.limit_test_batches=3", "--trainer.log_every_n_steps=1",
                                      "--trainer.callbacks+=DeviceStatsMonitor", "--trainer.callbacks.cpu_stats=true"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const CsvTable m = metrics();
  for (const char* key : {"on_test_batch_start/NumAllocs", "on_test_batch_end/MaxInUse", "on_test_batch_end/cpu_rss_bytes",
                          "on_test_batch_start/cpu_percent"})
    EXPECT_THAT(m.loggedAt(std::string("DeviceStatsMonitor.") + key), ElementsAre("0,0", "0,1", "0,2")) << key;
  EXPECT_THAT(m.loggedAt("test_loss"), ElementsAre("0,0"));
}

// ------------------------------------------------------------------ the progress bar

// "Epoch 0:  34% 11/32 [00:00<00:00, 1234.56it/s, loss=0.5, train_loss=0.5, v_num=0]"
const std::regex kBarLine(
    "Epoch ([0-9]+): +([0-9]+)% ([0-9]+)/([0-9]+) \\[[0-9]{2}:[0-9]{2}<[0-9]{2}:[0-9]{2}, [0-9]+\\.[0-9]{2}it/s, "
    "loss=([^,]+), train_loss=([^,]+), v_num=0\\]");

TEST_F(CallbacksTest, ProgressBarPrintsPlainLinesWhenStdoutIsNotATerminal) {
  const RunResult r = run({"fit", "-c", boringConfig(), "--trainer.max_epochs=2", "--trainer.log_every_n_steps=32",
                           "--trainer.enable_model_summary=false"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out.find('\r'), std::string::npos);
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
  const CsvTable m = metrics();
  std::istringstream lines(r.out);
  std::string line;
  std::vector<std::string> seen;  // "epoch:batch"
  while (std::getline(lines, line)) {
    std::smatch bar;
    if (!std::regex_match(line, bar, kBarLine)) continue;
    const int epoch = std::stoi(bar[1]), done = std::stoi(bar[3]);
    EXPECT_EQ(bar[4], "32");
    EXPECT_EQ(std::stoi(bar[2]), done * 100 / 32) << line;
    seen.push_back(bar[1].str() + ":" + bar[3].str());
    if (done == 32) {  // the epoch's last loss, as logged
      const std::string logged = fmt::format("{:.3g}", m.valueAt("train_loss", 32 * epoch + 31));
      EXPECT_EQ(bar[5], logged) << line;
      EXPECT_EQ(bar[6], logged) << line;
    }
  }
  // A line every tenth of an epoch (3 batches) and one at its end.
  EXPECT_THAT(seen, ElementsAre("0:3", "0:6", "0:9", "0:12", "0:15", "0:18", "0:21", "0:24", "0:27", "0:30", "0:32",
                                "1:3", "1:6", "1:9", "1:12", "1:15", "1:18", "1:21", "1:24", "1:27", "1:30", "1:32"));

  const RunResult test = run({"test", "-c", boringConfig(), "--trainer.limit_test_batches=5"});
  ASSERT_EQ(test.exit_code, 0) << test.describe();
  EXPECT_TRUE(std::regex_search(test.out, std::regex("(^|\n)5 batches in [0-9]{2}:[0-9]{2}\n"))) << test.out;
}

// max_steps that ends an epoch early: the bar counts the batches that run.
// 32 batches an epoch, accumulate 2: max_steps 21 runs epoch 0 whole (16
// steps) and 10 batches of epoch 1 (5 steps).
TEST_F(CallbacksTest, ProgressBarTotalIsTheBatchesMaxStepsLeaves) {
  const RunResult r = run({"fit", "-c", boringConfig(), "--trainer.max_steps=21", "--trainer.accumulate_grad_batches=2",
                           "--trainer.log_every_n_steps=1", "--trainer.enable_model_summary=false"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::istringstream lines(r.out);
  std::vector<std::string> seen;  // "epoch:done/total"
  for (std::string line; std::getline(lines, line);) {
    std::smatch bar;
    if (std::regex_match(line, bar, kBarLine)) seen.push_back(bar[1].str() + ":" + bar[3].str() + "/" + bar[4].str());
  }
  EXPECT_THAT(seen, ElementsAre("0:3/32", "0:6/32", "0:9/32", "0:12/32", "0:15/32", "0:18/32", "0:21/32", "0:24/32",
                                "0:27/32", "0:30/32", "0:32/32", "1:1/10", "1:2/10", "1:3/10", "1:4/10", "1:5/10",
                                "1:6/10", "1:7/10", "1:8/10", "1:9/10", "1:10/10"));
}

TEST_F(CallbacksTest, ProgressBarRedrawsOneLineOnATerminal) {
  // script(1) gives the run a pseudo-terminal as stdout.
  if (!std::filesystem::exists("/usr/bin/script")) GTEST_SKIP() << "no /usr/bin/script (util-linux)";
  RunOptions o;
  o.cwd = dir();
  o.env = env();
  const std::string command = std::string(HPU_BINARY_DIR "/hpu-train fit -c ") + boringConfig() +
                              " --trainer.max_epochs=1 --trainer.limit_train_batches=4 --trainer.logger=false"
                              " --trainer.enable_checkpointing=false --trainer.enable_model_summary=false";
  const RunResult r = runProgram("/usr/bin/script", {"-qec", command, "/dev/null"}, o);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (const char* redraw : {"\rEpoch 0:  25% 1/4 [", "\rEpoch 0:  50% 2/4 [", "\rEpoch 0:  75% 3/4 [",
                             "\rSanity Checking: 2/2 [", "\rValidation: 32/32 [", "\x1b[K"})
    EXPECT_THAT(r.out, HasSubstr(redraw));
  // The epoch's last redraw ends its line.
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\rEpoch 0: 100% 4/4 \\[[^\r\n]*\\]\x1b\\[K\r?\n"))) << r.out;
}

TEST_F(CallbacksTest, ProgressBarRefreshRateZeroPrintsNothing) {
  const RunResult r = run({"fit", "-c", boringConfig(), "--trainer.max_epochs=1", "--trainer.enable_model_summary=false",
                           "--trainer.callbacks+=TQDMProgressBar", "--trainer.callbacks.refresh_rate=0"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out.find("Epoch"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace hpu::cli::testing

// ------------------------------------------------------------------ keys of Lightning 2.4

namespace hpu::cli::testing {
namespace {

TEST_F(CallbacksTest, ModelCheckpointTrainTimeIntervalSavesByWallTime) {
  // A zero interval has always elapsed: a checkpoint after every step.
  fitBoring({"--trainer.max_epochs=1", "--trainer.limit_train_batches=3", "--trainer.limit_val_batches=0",
             "--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.save_top_k=-1",
             "--trainer.callbacks.train_time_interval=00:00:00:00"});
  EXPECT_THAT(checkpoints(), ElementsAre("epoch=0-step=1.ckpt", "epoch=0-step=2.ckpt", "epoch=0-step=3.ckpt"));
  // An hour has not: nothing by time, and no epoch trigger either.
  std::filesystem::remove_all(dir() / "lightning_logs");
  fitBoring({"--trainer.max_epochs=1", "--trainer.limit_train_batches=3", "--trainer.limit_val_batches=0",
             "--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.save_top_k=-1",
             "--trainer.callbacks.train_time_interval={hours: 1}", "--trainer.callbacks.save_last=true"});
  EXPECT_THAT(checkpoints(), ElementsAre("last.ckpt"));
  // Triggers exclude each other, as in Lightning.
  const RunResult both = boring("fit", {"--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.every_n_epochs=1",
                                        "--trainer.callbacks.train_time_interval=00:01:00:00"});
  EXPECT_EQ(both.exit_code, 2) << both.describe();
  EXPECT_EQ(both.err,
            "error: command line: trainer.callbacks[0].init_args.train_time_interval: Combination of parameters "
            "every_n_train_steps=0, every_n_epochs=1 and train_time_interval=3600s should be mutually exclusive; "
            "set one\n");
}

TEST_F(CallbacksTest, ModelCheckpointSaveOnTrainEpochEndOverridesTheSchedule) {
  // Validation twice an epoch saves after each validation by default ...
  fitBoring({"--trainer.max_epochs=1", "--trainer.val_check_interval=0.5", "--trainer.callbacks+=ModelCheckpoint",
             "--trainer.callbacks.save_top_k=-1"});
  EXPECT_THAT(checkpoints(), ElementsAre("epoch=0-step=16.ckpt", "epoch=0-step=32.ckpt"));
  // ... and once, at the epoch's end, when asked.
  std::filesystem::remove_all(dir() / "lightning_logs");
  fitBoring({"--trainer.max_epochs=2", "--trainer.val_check_interval=0.5", "--trainer.callbacks+=ModelCheckpoint",
             "--trainer.callbacks.save_top_k=-1", "--trainer.callbacks.save_on_train_epoch_end=true"});
  EXPECT_THAT(checkpoints(), ElementsAre("epoch=0-step=32.ckpt", "epoch=1-step=64.ckpt"));
}

TEST_F(CallbacksTest, ModelCheckpointVersionCounterOrOverwrite) {
  const std::vector<std::string> same_name{"--trainer.max_epochs=1", "--trainer.limit_val_batches=0",
                                           "--trainer.callbacks+=ModelCheckpoint",
                                           "--trainer.callbacks.dirpath=ckpts", "--trainer.callbacks.filename=model"};
  fitBoring(same_name);
  fitBoring(same_name);
  EXPECT_THAT(fileNames(dir() / "ckpts"), ElementsAre("model-v1.ckpt", "model.ckpt"));
  std::filesystem::remove_all(dir() / "ckpts");
  auto overwrite = same_name;
  overwrite.push_back("--trainer.callbacks.enable_version_counter=false");
  fitBoring(overwrite);
  fitBoring(overwrite);
  EXPECT_THAT(fileNames(dir() / "ckpts"), ElementsAre("model.ckpt"));
}

TEST_F(CallbacksTest, LearningRateMonitorLogsMomentumAndWeightDecay) {
  fitBoring({"--trainer.max_epochs=1", "--trainer.limit_val_batches=0", "--optimizer=SGD", "--optimizer.lr=0.1",
             "--optimizer.momentum=0.9", "--optimizer.weight_decay=0.01", "--trainer.callbacks+=LearningRateMonitor",
             "--trainer.callbacks.logging_interval=epoch", "--trainer.callbacks.log_momentum=true",
             "--trainer.callbacks.log_weight_decay=true"});
  CsvTable m = metrics();
  EXPECT_THAT(m.column("lr-SGD-momentum"), ::testing::Contains("0.9"));
  EXPECT_THAT(m.column("lr-SGD-weight_decay"), ::testing::Contains("0.01"));
  // Adam's momentum is its beta1.
  std::filesystem::remove_all(dir() / "lightning_logs");
  fitBoring({"--trainer.max_epochs=1", "--trainer.limit_val_batches=0", "--optimizer=Adam",
             "--optimizer.betas=[0.8, 0.99]", "--trainer.callbacks+=LearningRateMonitor",
             "--trainer.callbacks.logging_interval=epoch", "--trainer.callbacks.log_momentum=true"});
  m = metrics();
  EXPECT_THAT(m.column("lr-Adam-momentum"), ::testing::Contains("0.8"));
}

TEST_F(CallbacksTest, EarlyStoppingVerboseLogsItsChecks) {
  env()["HPU_LOG_LEVEL"] = "info";
  const RunResult r = boring("fit", {"--trainer.max_epochs=2", "--trainer.enable_progress_bar=false",
                                     "--trainer.enable_model_summary=false", "--trainer.log_every_n_steps=16",
                                     "--trainer.callbacks+=EarlyStopping", "--trainer.callbacks.verbose=true",
                                     "--trainer.callbacks.log_rank_zero_only=true"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("info: Metric val_loss improved to 0.626\n"));
  EXPECT_THAT(r.err, HasSubstr("info: Metric val_loss improved to 0.191\n"));
}

}  // namespace
}  // namespace hpu::cli::testing
