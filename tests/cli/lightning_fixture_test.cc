// The done-when config of issue 16: a file as Lightning 2.4's LightningCLI
// --print_config writes it with lightning-habana's classes
// (tests/fixtures/lightning_2_4_print_config.yaml: every Trainer key in
// Lightning's order, torch's init_args, Lightning's callbacks with all their
// keys) runs unchanged, and hpu-train prints it back as LightningCLI does.
#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "hpu_train_runner.h"

namespace hpu::cli::testing {
namespace {

using LightningFixtureTest = HpuTrainTest;

std::string fixture() { return HPU_SOURCE_DIR "/tests/fixtures/lightning_2_4_print_config.yaml"; }

// Every key of `expected` is in `actual` with an equal value (scalars by
// text, nulls as nulls); `path` names the first difference.
void expectContains(const YAML::Node& expected, const YAML::Node& actual, const std::string& path) {
  ASSERT_TRUE(actual.IsDefined()) << path << " is missing";
  if (expected.IsNull()) {
    EXPECT_TRUE(actual.IsNull()) << path << ": " << YAML::Dump(actual);
  } else if (expected.IsScalar()) {
    ASSERT_TRUE(actual.IsScalar()) << path;
    EXPECT_EQ(actual.Scalar(), expected.Scalar()) << path;
  } else if (expected.IsSequence()) {
    ASSERT_TRUE(actual.IsSequence()) << path;
    ASSERT_EQ(actual.size(), expected.size()) << path;
    for (std::size_t i = 0; i < expected.size(); ++i)
      expectContains(expected[i], actual[i], path + "[" + std::to_string(i) + "]");
  } else {
    ASSERT_TRUE(actual.IsMap()) << path;
    for (const auto& kv : expected)
      expectContains(kv.second, actual[kv.first.Scalar()], path + "." + kv.first.Scalar());
  }
}

TEST_F(LightningFixtureTest, RunsUnchanged) {
  const RunResult r = run({"fit", "-c", fixture()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err, "");  // nothing to warn about
  const std::filesystem::path log = dir() / "lightning_logs/version_0";
  // ModelCheckpoint's format string and save_last; LearningRateMonitor's epoch lrs from StepLR(gamma=0.5).
  EXPECT_TRUE(std::filesystem::exists(log / "checkpoints/last.ckpt"));
  std::size_t named = 0;
  for (const auto& e : std::filesystem::directory_iterator(log / "checkpoints"))
    named += e.path().filename().string().rfind("epoch=", 0) == 0 && e.path().string().find("-val_loss=") != std::string::npos;
  EXPECT_EQ(named, 1u);  // save_top_k: 1
  const std::string metrics = read((log / "metrics.csv").string());
  EXPECT_NE(metrics.find("lr-AdamW"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find(",0.0005,"), std::string::npos) << metrics;  // epoch 1's lr
  // The config saved beside the logs is the fixture, as hpu-train prints it.
  EXPECT_TRUE(std::filesystem::exists(log / "config.yaml"));
}

TEST_F(LightningFixtureTest, PrintsBackWhatLightningCliWrote) {
  YAML::Node lightning = YAML::LoadFile(fixture());
  // The fixture was printed with a torch that still had the schedulers'
  // `verbose` (deprecated); torch 2.13 has none, and hpu-train prints it
  // only when set.
  ASSERT_EQ(lightning["lr_scheduler"]["init_args"]["verbose"].Scalar(), "deprecated");
  lightning["lr_scheduler"]["init_args"].remove("verbose");
  const YAML::Node printed = YAML::Load(printConfig({"-c", fixture()}));
  expectContains(lightning, printed, "");
  // The same keys in the same order, but for the init_args hpu-train's
  // BoringModel has beyond Lightning's.
  std::vector<std::string> lightning_trainer, printed_trainer;
  for (const auto& kv : lightning["trainer"]) lightning_trainer.push_back(kv.first.Scalar());
  for (const auto& kv : printed["trainer"]) printed_trainer.push_back(kv.first.Scalar());
  EXPECT_EQ(printed_trainer, lightning_trainer);
  for (const char* group : {"optimizer", "lr_scheduler"}) {
    std::vector<std::string> a, b;
    for (const auto& kv : lightning[group]["init_args"]) a.push_back(kv.first.Scalar());
    for (const auto& kv : printed[group]["init_args"]) b.push_back(kv.first.Scalar());
    EXPECT_EQ(b, a) << group;
  }
  for (std::size_t i = 0; i < lightning["trainer"]["callbacks"].size(); ++i) {
    std::vector<std::string> a, b;
    for (const auto& kv : lightning["trainer"]["callbacks"][i]["init_args"]) a.push_back(kv.first.Scalar());
    for (const auto& kv : printed["trainer"]["callbacks"][i]["init_args"]) b.push_back(kv.first.Scalar());
    EXPECT_EQ(b, a) << "callback " << i;
  }
}

TEST_F(LightningFixtureTest, LightningHabanasParallelStrategyAsPrintConfigWritesIt) {
  write("parallel.yaml",
        "trainer:\n"
        "  strategy:\n"
        "    class_path: lightning_habana.HPUParallelStrategy\n"
        "    init_args:\n"
        "      accelerator: null\n"
        "      parallel_devices: null\n"
        "      cluster_environment: null\n"
        "      checkpoint_io: null\n"
        "      precision_plugin: null\n"
        "      ddp_comm_state: null\n"
        "      ddp_comm_hook: null\n"
        "      ddp_comm_wrapper: null\n"
        "      model_averaging_period: null\n"
        "      process_group_backend: hccl\n");
  const YAML::Node printed = YAML::Load(printConfig({"-c", fixture(), "-c", "parallel.yaml"}));
  expectContains(YAML::LoadFile((dir() / "parallel.yaml").string()), printed, "");
  // A part the Trainer builds is refused where the strategy would take it.
  const RunResult r = run({"fit", "-c", fixture(), "-c", "parallel.yaml",
                           "--trainer.strategy.checkpoint_io=lightning_habana.HPUCheckpointIO"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(r.err,
            "error: command line: trainer.strategy.init_args.checkpoint_io: only the default (null) is supported: the "
            "Trainer builds it from trainer.plugins (HPUCheckpointIO); leave it null\n");
}

}  // namespace
}  // namespace hpu::cli::testing
