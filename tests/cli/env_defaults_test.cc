// Environment defaults: PL_<SUBCOMMAND>__<KEY>__<KEY> variables apply only
// when JSONARGPARSE_DEFAULT_ENV (or HPU_DEFAULT_ENV) is true, and rank
// defaults < config files < environment < command line.
#include <yaml-cpp/yaml.h>

#include "hpu_train_runner.h"

namespace hpu::cli::testing {
namespace {

class EnvDefaultsTest : public HpuTrainTest {
 protected:
  void SetUp() override { write("four.yaml", "trainer:\n  max_epochs: 4\n"); }
  std::string maxEpochs(const std::vector<std::string>& args) {
    std::vector<std::string> all{"-c", boringConfig()};
    all.insert(all.end(), args.begin(), args.end());
    return YAML::Load(printConfig(all))["trainer"]["max_epochs"].as<std::string>("null");
  }
};

TEST_F(EnvDefaultsTest, IgnoredUnlessSwitchedOn) {
  env()["PL_FIT__TRAINER__MAX_EPOCHS"] = "3";
  EXPECT_EQ(maxEpochs({}), "null");
  env()["JSONARGPARSE_DEFAULT_ENV"] = "false";
  EXPECT_EQ(maxEpochs({}), "null");
  env()["JSONARGPARSE_DEFAULT_ENV"] = "true";
  EXPECT_EQ(maxEpochs({}), "3");
  env().erase("JSONARGPARSE_DEFAULT_ENV");
  env()["HPU_DEFAULT_ENV"] = "true";
  EXPECT_EQ(maxEpochs({}), "3");
}

TEST_F(EnvDefaultsTest, OnlyTheRunningSubcommandsVariablesApply) {
  env()["HPU_DEFAULT_ENV"] = "true";
  env()["PL_TEST__TRAINER__MAX_EPOCHS"] = "3";
  EXPECT_EQ(maxEpochs({}), "null");
  const RunResult r = run({"test", "-c", boringConfig(), "--print_config"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(YAML::Load(r.out)["trainer"]["max_epochs"].Scalar(), "3");
}

TEST_F(EnvDefaultsTest, PrecedenceDefaultsFilesEnvironmentCommandLine) {
  env()["JSONARGPARSE_DEFAULT_ENV"] = "true";
  EXPECT_EQ(maxEpochs({}), "null");  // nothing set: the default
  EXPECT_EQ(maxEpochs({"-c", "four.yaml"}), "4");
  env()["PL_FIT__TRAINER__MAX_EPOCHS"] = "3";
  EXPECT_EQ(maxEpochs({"-c", "four.yaml"}), "3");                            // environment over files
  EXPECT_EQ(maxEpochs({"-c", "four.yaml", "--trainer.max_epochs=8"}), "8");  // command line over environment
  EXPECT_EQ(maxEpochs({"--trainer.max_epochs", "8", "-c", "four.yaml"}), "8");
}

TEST_F(EnvDefaultsTest, ComponentsAndTheirKeys) {
  env()["JSONARGPARSE_DEFAULT_ENV"] = "true";
  env()["PL_FIT__MODEL"] = "MLPClassifier";
  env()["PL_FIT__MODEL__LR"] = "0.5";
  env()["PL_FIT__TRAINER__DEVICES"] = "[0, 1]";
  YAML::Node cfg = YAML::Load(printConfig({"-c", boringConfig()}));
  EXPECT_EQ(cfg["model"]["class_path"].Scalar(), "MLPClassifier");
  EXPECT_EQ(cfg["model"]["init_args"]["lr"].Scalar(), "0.5");
  ASSERT_EQ(cfg["trainer"]["devices"].size(), 2u);
  EXPECT_EQ(cfg["trainer"]["devices"][1].Scalar(), "1");
}

TEST_F(EnvDefaultsTest, BadVariablesAreNamed) {
  env()["JSONARGPARSE_DEFAULT_ENV"] = "true";
  env()["PL_FIT__TRAINER__MAX_EPOCH"] = "3";
  env()["PL_FIT__TRAINER__NUM_NODES"] = "zero";
  RunResult r = run({"fit", "-c", boringConfig(), "--print_config"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "error: environment PL_FIT__TRAINER__MAX_EPOCH: trainer.max_epoch: unknown key; did you mean "
            "'max_epochs'?\n"
            "error: environment PL_FIT__TRAINER__NUM_NODES: trainer.num_nodes: expected int, got 'zero'\n");
  // A switch that is neither true nor false is an error, not silently off.
  env().clear();
  env()["HPU_DEFAULT_ENV"] = "1";
  r = run({"fit", "-c", boringConfig(), "--print_config"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "error: environment HPU_DEFAULT_ENV: expected true or false, got '1'\n");
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace hpu::cli::testing
