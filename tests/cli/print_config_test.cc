// --print_config: the resolved config as YAML that, fed back with --config,
// reproduces itself; the skip_default, skip_null and comments flags; and
// seed_everything: true turned into the concrete seed that was picked.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <regex>
#include <sstream>

#include "hpu_train_runner.h"

namespace hpu::cli::testing {
namespace {

class PrintConfigTest : public HpuTrainTest {
 protected:
  void SetUp() override {
    write("rich.yaml",
          "seed_everything: 7\n"
          "trainer:\n"
          "  devices: [0]\n"
          "  max_epochs: 2\n"
          "  limit_train_batches: 0.25\n"
          "  logger:\n"
          "    class_path: CSVLogger\n"
          "    init_args: {name: runs, version: \"v1\"}\n"
          "  callbacks:\n"
          "    - class_path: EarlyStopping\n"
          "      init_args: {monitor: val_acc, mode: max}\n"
          "    - ModelCheckpoint\n"
          "model:\n"
          "  class_path: MLPClassifier\n"
          "  init_args: {hidden: [32, 16], activation: gelu}\n"
          "data:\n"
          "  class_path: RandomDataModule\n"
          "  init_args: {size: 784, batch_size: 8}\n"
          "optimizer: {class_path: AdamW, init_args: {lr: 3e-4, betas: [0.8, 0.99]}}\n"
          "lr_scheduler: {class_path: MultiStepLR, init_args: {milestones: [2, 4]}}\n"
          "ckpt_path: \"null\"\n");  // a file named "null", not a null
  }

  // Prints `args` with `flags`, saves it, and expects `fit --config saved.yaml
  // --print_config` to print exactly `expected`.
  void expectFeedsBackTo(const std::vector<std::string>& args, const std::string& flags, const std::string& expected) {
    write("saved.yaml", printConfig(args, flags));
    EXPECT_EQ(printConfig({"--config", "saved.yaml"}), expected) << "flags: " << flags;
  }
};

TEST_F(PrintConfigTest, PrintedConfigReproducesItself) {
  const std::string printed = printConfig({"-c", "rich.yaml"});
  write("saved.yaml", printed);
  EXPECT_EQ(printConfig({"--config", "saved.yaml"}), printed);
  // The printed text keeps the values that could read as other types.
  YAML::Node cfg = YAML::Load(printed);
  EXPECT_EQ(cfg["ckpt_path"].Scalar(), "null");
  EXPECT_FALSE(cfg["ckpt_path"].IsNull());
  EXPECT_EQ(cfg["trainer"]["logger"]["init_args"]["version"].Scalar(), "v1");
  EXPECT_EQ(cfg["optimizer"]["init_args"]["lr"].Scalar(), "0.0003");
  EXPECT_EQ(cfg["trainer"]["limit_train_batches"].Scalar(), "0.25");
  // Every default is expanded.
  EXPECT_EQ(cfg["trainer"]["accumulate_grad_batches"].Scalar(), "1");
  EXPECT_TRUE(cfg["trainer"]["num_sanity_val_steps"].IsNull());  // Lightning's default: null (2 sanity batches)
  EXPECT_EQ(cfg["trainer"]["callbacks"][1]["init_args"]["save_top_k"].Scalar(), "1");
  EXPECT_EQ(cfg["data"]["init_args"]["length"].Scalar(), "64");
}

TEST_F(PrintConfigTest, SkipDefaultKeepsOnlyWhatDiffers) {
  const std::string slim =
      printConfig({"-c", boringConfig(), "--trainer.max_epochs=5", "--model.lr=0.2"}, "skip_default");
  EXPECT_EQ(slim,
            "seed_everything: 42\n"
            "trainer:\n"
            "  devices: 1\n"
            "  max_epochs: 5\n"
            "model:\n"
            "  class_path: lightning.pytorch.demos.boring_classes.BoringModel\n"
            "  init_args:\n"
            "    lr: 0.2\n"
            "data:\n"
            "  class_path: RandomDataModule\n");
  expectFeedsBackTo({"-c", boringConfig(), "--trainer.max_epochs=5", "--model.lr=0.2"}, "skip_default",
                    printConfig({"-c", boringConfig(), "--trainer.max_epochs=5", "--model.lr=0.2"}));
  expectFeedsBackTo({"-c", "rich.yaml"}, "skip_default", printConfig({"-c", "rich.yaml"}));
}

TEST_F(PrintConfigTest, SkipNullDropsNullKeys) {
  const std::string full = printConfig({"-c", "rich.yaml"});
  const std::string lean = printConfig({"-c", "rich.yaml"}, "skip_null");
  EXPECT_NE(full.find("  max_time: null\n"), std::string::npos);
  EXPECT_EQ(lean.find(": null\n"), std::string::npos) << lean;
  EXPECT_NE(lean.find("  max_epochs: 2\n"), std::string::npos) << lean;
  EXPECT_NE(lean.find("ckpt_path: \"null\"\n"), std::string::npos) << lean;  // a string, kept
  // Every null of this config is also its key's default, so nothing is lost.
  expectFeedsBackTo({"-c", "rich.yaml"}, "skip_null", full);
}

TEST_F(PrintConfigTest, CommentsDescribeEveryKeyAndStillLoad) {
  const std::string commented = printConfig({"-c", boringConfig(), "--trainer.max_epochs=5"}, "comments");
  EXPECT_NE(commented.find("  # Stop after this many epochs (null: 1000 unless max_steps is set; -1: no limit). "
                           "(type: Optional[int], default: null)\n"
                           "  max_epochs: 5\n"),
            std::string::npos)
      << commented;
  EXPECT_NE(commented.find("  # Lightning's BoringModel: Linear(32, 2) pushed towards ones; for smoke tests.\n"
                           "  class_path: lightning.pytorch.demos.boring_classes.BoringModel\n"),
            std::string::npos)
      << commented;
  // BoringModel's lr is hpu-train's own (Lightning's BoringModel has no
  // arguments): printed, with its comment, only when set.
  EXPECT_EQ(commented.find("    lr: 0.1\n"), std::string::npos) << commented;
  const std::string with_lr =
      printConfig({"-c", boringConfig(), "--trainer.max_epochs=5", "--model.lr=0.05"}, "comments");
  EXPECT_NE(with_lr.find("    # Learning rate of the default SGD. (type: float, default: 0.1)\n    lr: 0.05\n"),
            std::string::npos)
      << with_lr;
  // Every key line has its comment line just above it.
  std::istringstream lines(commented);
  std::string prev, line;
  const std::regex key_line(R"(^ *[a-z_]+:.*)");
  while (std::getline(lines, line)) {
    if (std::regex_match(line, key_line) && line.find("init_args:") == std::string::npos) {
      EXPECT_NE(prev.find("# "), std::string::npos) << "no comment above '" << line << "'";
    }
    prev = line;
  }
  expectFeedsBackTo({"-c", boringConfig(), "--trainer.max_epochs=5"}, "comments",
                    printConfig({"-c", boringConfig(), "--trainer.max_epochs=5"}));
  expectFeedsBackTo({"-c", "rich.yaml"}, "skip_default,skip_null,comments", printConfig({"-c", "rich.yaml"}));
}

TEST_F(PrintConfigTest, SeedTrueBecomesTheSeedThatWasPicked) {
  const std::string printed = printConfig({"-c", boringConfig(), "--seed_everything=true"});
  const std::string seed = YAML::Load(printed)["seed_everything"].Scalar();
  ASSERT_TRUE(std::regex_match(seed, std::regex("[0-9]+"))) << printed;
  EXPECT_LE(std::stoull(seed), 4294967295ull);
  write("saved.yaml", printed);
  EXPECT_EQ(printConfig({"-c", "saved.yaml"}), printed);
  // false stays false: unseeded is a choice, not a value to pick.
  EXPECT_EQ(YAML::Load(printConfig({"-c", boringConfig(), "--seed_everything=false"}))["seed_everything"].Scalar(),
            "false");
  EXPECT_EQ(YAML::Load(printConfig({"-c", boringConfig(), "--seed_everything=123"}))["seed_everything"].Scalar(),
            "123");
}

}  // namespace
}  // namespace hpu::cli::testing

namespace hpu::cli::testing {
namespace {

TEST_F(PrintConfigTest, WithoutAModelPrintsACompleteTemplate) {
  const RunResult r = run({"fit", "--print_config"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  YAML::Node cfg = YAML::Load(r.out);
  // Every group, in LightningCLI's order, the classes left for the user.
  std::vector<std::string> keys;
  for (const auto& kv : cfg) keys.push_back(kv.first.Scalar());
  EXPECT_EQ(keys, (std::vector<std::string>{"seed_everything", "trainer", "model", "data", "optimizer", "lr_scheduler",
                                            "ckpt_path"}));
  EXPECT_TRUE(cfg["model"].IsNull());
  EXPECT_TRUE(cfg["data"].IsNull());
  EXPECT_EQ(cfg["trainer"].size(), 39u);  // every Trainer key of Lightning 2.4
  EXPECT_EQ(cfg["trainer"]["max_steps"].Scalar(), "-1");
  // hpu-train's own trainer.max_restarts only when set, so that LightningCLI
  // reads the printed file too.
  EXPECT_FALSE(cfg["trainer"]["max_restarts"]);
  const RunResult restarts = run({"fit", "--print_config", "--trainer.max_restarts=2"});
  ASSERT_EQ(restarts.exit_code, 0) << restarts.describe();
  EXPECT_EQ(YAML::Load(restarts.out)["trainer"]["max_restarts"].Scalar(), "2");
  // The template is a config: given a model and data it runs.
  write("template.yaml", r.out);
  const RunResult filled = run({"fit", "-c", "template.yaml", "--model=BoringModel", "--data=RandomDataModule",
                                "--trainer.max_epochs=1", "--trainer.limit_train_batches=1",
                                "--trainer.limit_val_batches=0"});
  EXPECT_EQ(filled.exit_code, 0) << filled.describe();
  // Running without a model still says what is missing.
  const RunResult missing = run({"fit", "-c", "template.yaml"});
  EXPECT_EQ(missing.exit_code, 2) << missing.describe();
  EXPECT_EQ(missing.err.rfind("error: template.yaml:", 0), 0u) << missing.err;
  EXPECT_NE(missing.err.find("model: expected a Model class name or {class_path, init_args}, got null"),
            std::string::npos)
      << missing.err;
}

}  // namespace
}  // namespace hpu::cli::testing
