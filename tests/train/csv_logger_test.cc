// CSVLogger as Lightning's: <save_dir>/<name>/version_N/ holds metrics.csv
// (sorted columns, one row per logged step, epoch and step in every row),
// hparams.yaml and the saved config.yaml; the results table test prints;
// and the same seed and config giving the same metrics.csv byte for byte.
#include <gmock/gmock.h>
#include <spdlog/fmt/fmt.h>
#include <yaml-cpp/yaml.h>

#include <cmath>

#include "train_support.h"

namespace hpu::cli::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using CsvLoggerTest = FashionRunTest;

TEST_F(CsvLoggerTest, FitWritesMetricsHparamsAndConfigIntoOneVersionFolder) {
  const RunResult fit = run({"fit", "-c", fashionConfig(), "--trainer.max_epochs=2",
                             "--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.save_last=true"});
  ASSERT_EQ(fit.exit_code, 0) << fit.describe();
  // The default loggers share the folder: TensorBoard's event file beside metrics.csv.
  EXPECT_THAT(fileNames(dir() / "lightning_logs/version_0"),
              ElementsAre("config.yaml", StartsWith("events.out.tfevents."), "hparams.yaml", "metrics.csv"));
  EXPECT_THAT(fileNames(dir() / "lightning_logs/version_0/checkpoints"), ElementsAre("epoch=1-step=8.ckpt", "last.ckpt"));
  EXPECT_EQ(read("lightning_logs/version_0/hparams.yaml"),
            "hidden: [32]\ndropout: 0.2\nactivation: relu\nlr: 0.001\nlabel_smoothing: 0.0\n");
  EXPECT_EQ(YAML::Load(read("lightning_logs/version_0/config.yaml"))["trainer"]["max_epochs"].as<int>(), 2);

  const CsvTable m = metrics();
  EXPECT_THAT(m.header, ElementsAre("epoch", "step", "train_loss", "val_acc", "val_loss"));
  EXPECT_THAT(m.loggedAt("train_loss"), ElementsAre("0,1", "0,3", "1,5", "1,7"));
  EXPECT_THAT(m.loggedAt("val_acc"), ElementsAre("0,3", "1,7"));
  EXPECT_EQ(m.loggedAt("val_loss"), m.loggedAt("val_acc"));
  EXPECT_EQ(m.rows.size(), 6u);
  for (const std::int64_t step : {3, 7}) {
    const double correct = m.valueAt("val_acc", step) * 128;  // of 2 batches of 64 images
    EXPECT_EQ(correct, std::round(correct)) << "step " << step;
  }

  // Evaluating the checkpoint logs into the next version and prints the table.
  const RunResult test = run({"test", "-c", fashionConfig(), "--ckpt_path", "last"});
  ASSERT_EQ(test.exit_code, 0) << test.describe();
  const CsvTable t = metrics("lightning_logs/version_1");
  EXPECT_THAT(t.header, ElementsAre("epoch", "step", "test_acc", "test_loss"));
  ASSERT_EQ(t.rows.size(), 1u);
  const std::string rule(60, '-');
  EXPECT_THAT(test.out, HasSubstr(fmt::format("{0}\n{1:>22}{2:>30}\n{0}\n{3:>22}{4:>30.10g}\n{5:>22}{6:>30.10g}\n{0}\n",
                                              rule, "Test metric", "DataLoader 0", "test_acc",
                                              std::stod(t.column("test_acc")[0]), "test_loss",
                                              std::stod(t.column("test_loss")[0]))));
}

TEST_F(CsvLoggerTest, SameSeedAndConfigGiveTheSameMetricsFile) {
  for (const char* seed : {"7", "7", "8"}) {
    const RunResult r = run({"fit", "-c", fashionConfig(), "--trainer.max_epochs=2", std::string("--seed_everything=") + seed});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
  }
  const std::string first = read("lightning_logs/version_0/metrics.csv");
  EXPECT_EQ(read("lightning_logs/version_1/metrics.csv"), first);
  EXPECT_NE(read("lightning_logs/version_2/metrics.csv"), first) << "another seed, other numbers";
}

using CsvLoggerOptionsTest = TrainRunTest;

TEST_F(CsvLoggerOptionsTest, SaveDirNameVersionAndPrefix) {
  fitBoring({"--trainer.max_epochs=1", "--trainer.log_every_n_steps=16", "--trainer.logger=CSVLogger",
             "--trainer.logger.save_dir=logs", "--trainer.logger.name=exp", "--trainer.logger.version=run_a",
             "--trainer.logger.prefix=p"});
  EXPECT_THAT(fileNames(dir() / "logs/exp/run_a"), ElementsAre("config.yaml", "hparams.yaml", "metrics.csv"));
  EXPECT_THAT(fileNames(dir() / "logs/exp/run_a/checkpoints"), ElementsAre("epoch=0-step=32.ckpt"));
  // Lightning prefixes every key it is given, epoch too, joined by "-".
  const CsvTable m = readCsv(dir() / "logs/exp/run_a/metrics.csv");
  EXPECT_THAT(m.header, ElementsAre("p-epoch", "p-train_loss", "p-val_loss", "step"));
  EXPECT_THAT(m.column("step"), ElementsAre("15", "31", "31"));
}

TEST_F(CsvLoggerOptionsTest, AnIntegerVersionAndTheDefaultRootDir) {
  fitBoring({"--trainer.max_epochs=1", "--trainer.default_root_dir=out", "--trainer.logger=CSVLogger",
             "--trainer.logger.version=5"});
  EXPECT_THAT(fileNames(dir() / "out/lightning_logs/version_5"), ElementsAre("config.yaml", "hparams.yaml", "metrics.csv"));
  EXPECT_THAT(fileNames(dir() / "out/lightning_logs/version_5/checkpoints"), ElementsAre("epoch=0-step=32.ckpt"));
  // The next run without a version takes the next free number.
  fitBoring({"--trainer.max_epochs=1", "--trainer.default_root_dir=out"});
  EXPECT_THAT(metrics("out/lightning_logs/version_6").loggedAt("val_loss"), ElementsAre("0,31"));
}

}  // namespace
}  // namespace hpu::cli::testing
