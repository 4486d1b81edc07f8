// The saved config: a real (short) fit writes <log_dir>/config.yaml equal to
// what --print_config shows; a second run into the same log directory is
// refused unless --save_config_overwrite is given.
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <regex>

#include "hpu_train_runner.h"

namespace hpu::cli::testing {
namespace {

class SavedConfigTest : public HpuTrainTest {
 protected:
  // One epoch of BoringModel on 64 random samples into lightning_logs/version_0.
  std::vector<std::string> fitArgs(const std::string& max_epochs = "1") {
    return {"-c",
            boringConfig(),
            "--trainer.max_epochs=" + max_epochs,
            "--trainer.enable_progress_bar=false",
            "--trainer.logger=CSVLogger",
            "--trainer.logger.version=0"};
  }
  RunResult fit(std::vector<std::string> args) {
    args.insert(args.begin(), "fit");
    return run(args);
  }
  static constexpr const char* kSaved = "lightning_logs/version_0/config.yaml";
};

TEST_F(SavedConfigTest, FitSavesWhatPrintConfigShows) {
  const RunResult r = fit(fitArgs());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  ASSERT_TRUE(std::filesystem::exists(dir() / kSaved)) << r.describe();
  EXPECT_EQ(read(kSaved), printConfig(fitArgs()));
  EXPECT_TRUE(std::filesystem::exists(dir() / "lightning_logs/version_0/metrics.csv"));
}

TEST_F(SavedConfigTest, SecondRunIntoTheSameDirectoryIsRefused) {
  ASSERT_EQ(fit(fitArgs()).exit_code, 0);
  const std::string first = read(kSaved);
  const RunResult again = fit(fitArgs("2"));
  EXPECT_EQ(again.exit_code, 2) << again.describe();
  EXPECT_EQ(again.err,
            "error: ./lightning_logs/version_0/config.yaml already exists: refusing to overwrite the config of an "
            "earlier run. Delete it, log to another directory (trainer.default_root_dir, trainer.logger's "
            "version), or pass --save_config_overwrite\n");
  EXPECT_EQ(read(kSaved), first);  // untouched

  std::vector<std::string> overwrite = fitArgs("2");
  overwrite.push_back("--save_config_overwrite");
  const RunResult forced = fit(overwrite);
  EXPECT_EQ(forced.exit_code, 0) << forced.describe();
  EXPECT_EQ(read(kSaved), printConfig(fitArgs("2")));
  // Also accepted before the subcommand, like the other trainer options.
  std::vector<std::string> before{"--save_config_overwrite", "fit"};
  const std::vector<std::string> args = fitArgs("3");
  before.insert(before.end(), args.begin(), args.end());
  const RunResult forced_before = run(before);
  EXPECT_EQ(forced_before.exit_code, 0) << forced_before.describe();
  EXPECT_EQ(YAML::Load(read(kSaved))["trainer"]["max_epochs"].Scalar(), "3");
}

TEST_F(SavedConfigTest, DefaultLoggerTakesTheNextFreeVersion) {
  const std::vector<std::string> args{"-c", boringConfig(), "--trainer.max_epochs=1",
                                      "--trainer.enable_progress_bar=false"};
  ASSERT_EQ(fit(args).exit_code, 0);
  const RunResult second = fit(args);
  ASSERT_EQ(second.exit_code, 0) << second.describe();
  EXPECT_EQ(read("lightning_logs/version_0/config.yaml"), read("lightning_logs/version_1/config.yaml"));
}

TEST_F(SavedConfigTest, PickedSeedIsSavedAndReproducesTheRun) {
  std::vector<std::string> args = fitArgs();
  args.push_back("--seed_everything=true");
  ASSERT_EQ(fit(args).exit_code, 0);
  const std::string saved = read(kSaved);
  const std::string seed = YAML::Load(saved)["seed_everything"].Scalar();
  EXPECT_TRUE(std::regex_match(seed, std::regex("[0-9]+"))) << saved;
  EXPECT_EQ(printConfig({"--config", kSaved}), saved);
  // Training again from the saved config gives the same numbers.
  const RunResult rerun = run({"fit", "--config", kSaved, "--trainer.logger.version=1"});
  ASSERT_EQ(rerun.exit_code, 0) << rerun.describe();
  EXPECT_EQ(read("lightning_logs/version_1/metrics.csv"), read("lightning_logs/version_0/metrics.csv"));
}

}  // namespace
}  // namespace hpu::cli::testing
