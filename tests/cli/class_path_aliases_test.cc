// Class paths as LightningCLI users write them resolve to the canonical
// components, which is what --print_config shows.
#include <yaml-cpp/yaml.h>

#include "hpu_train_runner.h"

namespace hpu::cli::testing {
namespace {

using ClassPathAliasesTest = HpuTrainTest;

std::string aliasConfig() { return HPU_SOURCE_DIR "/tests/cli/data/lightning_cli_aliases.yaml"; }

TEST_F(ClassPathAliasesTest, LightningCliConfigPrintsCanonicalNames) {
  YAML::Node cfg = YAML::Load(printConfig({"-c", aliasConfig()}));
  YAML::Node t = cfg["trainer"];
  EXPECT_EQ(t["accelerator"]["class_path"].Scalar(), "HPUAccelerator");
  EXPECT_EQ(t["strategy"]["class_path"].Scalar(), "SingleHPUStrategy");
  EXPECT_EQ(t["strategy"]["init_args"]["device"].Scalar(), "0");
  ASSERT_EQ(t["callbacks"].size(), 2u);
  EXPECT_EQ(t["callbacks"][0]["class_path"].Scalar(), "EarlyStopping");
  EXPECT_EQ(t["callbacks"][0]["init_args"]["patience"].Scalar(), "4");
  EXPECT_EQ(t["callbacks"][1]["class_path"].Scalar(), "ModelCheckpoint");
  EXPECT_EQ(t["callbacks"][1]["init_args"]["save_top_k"].Scalar(), "2");
  EXPECT_EQ(t["plugins"][0]["class_path"].Scalar(), "HPUCheckpointIO");
  EXPECT_EQ(t["logger"]["class_path"].Scalar(), "CSVLogger");
  EXPECT_EQ(cfg["model"]["class_path"].Scalar(), "BoringModel");
  EXPECT_EQ(cfg["data"]["class_path"].Scalar(), "RandomDataModule");
  EXPECT_EQ(cfg["optimizer"]["class_path"].Scalar(), "AdamW");
  EXPECT_EQ(cfg["optimizer"]["init_args"]["lr"].Scalar(), "0.01");
  EXPECT_EQ(cfg["lr_scheduler"]["class_path"].Scalar(), "StepLR");
}

TEST_F(ClassPathAliasesTest, AliasesOnTheCommandLine) {
  YAML::Node cfg = YAML::Load(
      printConfig({"-c", boringConfig(), "--trainer.accelerator=lightning_habana.pytorch.accelerator.HPUAccelerator",
                   "--trainer.strategy=lightning_habana.pytorch.strategies.SingleHPUStrategy",
                   "--trainer.callbacks+=lightning.pytorch.callbacks.EarlyStopping", "--trainer.callbacks.patience=6",
                   "--trainer.callbacks+=lightning.pytorch.callbacks.ModelCheckpoint", "--optimizer",
                   "torch.optim.AdamW", "--optimizer.lr", "0.02"}));
  EXPECT_EQ(cfg["trainer"]["accelerator"]["class_path"].Scalar(), "HPUAccelerator");
  EXPECT_EQ(cfg["trainer"]["strategy"]["class_path"].Scalar(), "SingleHPUStrategy");
  EXPECT_EQ(cfg["trainer"]["callbacks"][0]["class_path"].Scalar(), "EarlyStopping");
  EXPECT_EQ(cfg["trainer"]["callbacks"][0]["init_args"]["patience"].Scalar(), "6");
  EXPECT_EQ(cfg["trainer"]["callbacks"][1]["class_path"].Scalar(), "ModelCheckpoint");
  EXPECT_EQ(cfg["optimizer"]["class_path"].Scalar(), "AdamW");
  EXPECT_EQ(cfg["optimizer"]["init_args"]["lr"].Scalar(), "0.02");
}

TEST_F(ClassPathAliasesTest, ParallelStrategyAndPluginAliases) {
  YAML::Node t = YAML::Load(
      printConfig({"-c", boringConfig(), "--trainer.strategy=lightning_habana.pytorch.strategies.HPUParallelStrategy",
                   "--trainer.plugins+=lightning_habana.pytorch.plugins.precision.HPUPrecisionPlugin",
                   "--trainer.plugins.precision=bf16-mixed",
                   "--trainer.plugins+=lightning_habana.pytorch.plugins.io_plugins.HPUCheckpointIO",
                   "--trainer.plugins+=lightning.pytorch.plugins.environments.SLURMEnvironment"}))["trainer"];
  EXPECT_EQ(t["strategy"]["class_path"].Scalar(), "HPUParallelStrategy");
  ASSERT_EQ(t["plugins"].size(), 3u);
  EXPECT_EQ(t["plugins"][0]["class_path"].Scalar(), "HPUPrecisionPlugin");
  EXPECT_EQ(t["plugins"][0]["init_args"]["precision"].Scalar(), "bf16-mixed");
  EXPECT_EQ(t["plugins"][1]["class_path"].Scalar(), "HPUCheckpointIO");
  EXPECT_EQ(t["plugins"][2]["class_path"].Scalar(), "SLURMEnvironment");
}

TEST_F(ClassPathAliasesTest, AnAliasIsTheSameClassAsItsCanonicalName) {
  // Naming the class again in its other spelling keeps its init_args.
  YAML::Node cfg = YAML::Load(printConfig({"-c", aliasConfig(), "--optimizer=AdamW", "--model=BoringModel"}));
  EXPECT_EQ(cfg["optimizer"]["init_args"]["lr"].Scalar(), "0.01");
  write("canonical.yaml", "optimizer: {class_path: AdamW, init_args: {weight_decay: 0.5}}\n");
  cfg = YAML::Load(printConfig({"-c", aliasConfig(), "-c", "canonical.yaml"}));
  EXPECT_EQ(cfg["optimizer"]["init_args"]["lr"].Scalar(), "0.01");
  EXPECT_EQ(cfg["optimizer"]["init_args"]["weight_decay"].Scalar(), "0.5");
}

TEST_F(ClassPathAliasesTest, AliasConfigPrintsTheSameAsItsCanonicalTwin) {
  const std::string canonical = printConfig({"-c", aliasConfig()});
  write("canonical.yaml", canonical);
  EXPECT_EQ(printConfig({"-c", "canonical.yaml"}), canonical);
  // No Python class path is left.
  EXPECT_EQ(canonical.find("lightning."), std::string::npos) << canonical;
  EXPECT_EQ(canonical.find("lightning_habana"), std::string::npos) << canonical;
  EXPECT_EQ(canonical.find("torch."), std::string::npos) << canonical;
}

}  // namespace
}  // namespace hpu::cli::testing
