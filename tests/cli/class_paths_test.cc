// Class paths resolve by rule (a registered class's name, or any dotted path
// ending in it under the packages Lightning users import from), print as
// the class path LightningCLI writes, and unknown ones list close matches.
#include <yaml-cpp/yaml.h>

#include "hpu_train_runner.h"

namespace hpu::cli::testing {
namespace {

using ClassPathsTest = HpuTrainTest;

std::string lightningConfig() { return HPU_SOURCE_DIR "/tests/cli/data/lightning_class_paths.yaml"; }

TEST_F(ClassPathsTest, SubmodulePathsResolveAndPrintAsLightningCliWritesThem) {
  YAML::Node cfg = YAML::Load(printConfig({"-c", lightningConfig()}));
  YAML::Node t = cfg["trainer"];
  EXPECT_EQ(t["accelerator"]["class_path"].Scalar(), "lightning_habana.HPUAccelerator");
  EXPECT_FALSE(t["accelerator"]["init_args"].IsDefined());  // a class without init_args is its class_path alone
  EXPECT_EQ(t["strategy"]["class_path"].Scalar(), "lightning_habana.SingleHPUStrategy");
  EXPECT_EQ(t["strategy"]["init_args"]["device"].Scalar(), "0");
  ASSERT_EQ(t["callbacks"].size(), 2u);
  EXPECT_EQ(t["callbacks"][0]["class_path"].Scalar(), "lightning.pytorch.callbacks.EarlyStopping");
  EXPECT_EQ(t["callbacks"][0]["init_args"]["patience"].Scalar(), "4");
  EXPECT_EQ(t["callbacks"][1]["class_path"].Scalar(), "lightning.pytorch.callbacks.ModelCheckpoint");
  EXPECT_EQ(t["callbacks"][1]["init_args"]["save_top_k"].Scalar(), "2");
  EXPECT_EQ(t["plugins"][0]["class_path"].Scalar(), "lightning_habana.HPUCheckpointIO");
  EXPECT_EQ(t["logger"]["class_path"].Scalar(), "lightning.pytorch.loggers.CSVLogger");
  EXPECT_EQ(t["profiler"]["class_path"].Scalar(), "lightning.pytorch.profilers.SimpleProfiler");
  EXPECT_EQ(cfg["model"]["class_path"].Scalar(), "lightning.pytorch.demos.boring_classes.BoringModel");
  EXPECT_EQ(cfg["data"]["class_path"].Scalar(), "lightning.pytorch.demos.boring_classes.BoringDataModule");
  EXPECT_EQ(cfg["optimizer"]["class_path"].Scalar(), "torch.optim.AdamW");
  EXPECT_EQ(cfg["optimizer"]["init_args"]["lr"].Scalar(), "0.01");
  EXPECT_EQ(cfg["lr_scheduler"]["class_path"].Scalar(), "lightning.pytorch.cli.ReduceLROnPlateau");
}

TEST_F(ClassPathsTest, EverySpellingOfTheRuleNamesTheSameClass) {
  for (const char* spelling :
       {"ModelCheckpoint", "lightning.pytorch.callbacks.ModelCheckpoint",
        "lightning.pytorch.callbacks.model_checkpoint.ModelCheckpoint", "pytorch_lightning.callbacks.ModelCheckpoint",
        "pytorch_lightning.callbacks.model_checkpoint.ModelCheckpoint"}) {
    YAML::Node cfg =
        YAML::Load(printConfig({"-c", boringConfig(), std::string("--trainer.callbacks+=") + spelling}));
    EXPECT_EQ(cfg["trainer"]["callbacks"][0]["class_path"].Scalar(), "lightning.pytorch.callbacks.ModelCheckpoint")
        << spelling;
  }
  for (const char* spelling : {"HPUParallelStrategy", "lightning_habana.HPUParallelStrategy",
                               "lightning_habana.pytorch.HPUParallelStrategy",
                               "lightning_habana.pytorch.strategies.HPUParallelStrategy",
                               "lightning_habana.pytorch.strategies.parallel.HPUParallelStrategy"}) {
    YAML::Node cfg = YAML::Load(printConfig({"-c", boringConfig(), std::string("--trainer.strategy=") + spelling}));
    EXPECT_EQ(cfg["trainer"]["strategy"]["class_path"].Scalar(), "lightning_habana.HPUParallelStrategy") << spelling;
  }
  for (const char* spelling : {"StepLR", "torch.optim.lr_scheduler.StepLR"}) {
    YAML::Node cfg = YAML::Load(
        printConfig({"-c", boringConfig(), "--optimizer=torch.optim.sgd.SGD", std::string("--lr_scheduler=") + spelling}));
    EXPECT_EQ(cfg["optimizer"]["class_path"].Scalar(), "torch.optim.SGD");
    EXPECT_EQ(cfg["lr_scheduler"]["class_path"].Scalar(), "torch.optim.lr_scheduler.StepLR") << spelling;
  }
  YAML::Node env = YAML::Load(printConfig(
      {"-c", boringConfig(), "--trainer.plugins+=lightning.fabric.plugins.environments.slurm.SLURMEnvironment"}));
  EXPECT_EQ(env["trainer"]["plugins"][0]["class_path"].Scalar(),
            "lightning.pytorch.plugins.environments.SLURMEnvironment");
}

TEST_F(ClassPathsTest, UnknownPathsListTheCloseMatches) {
  RunResult r = run({"fit", "-c", boringConfig(),
                     "--trainer.callbacks+=lightning.pytorch.callbacks.model_checkpoint.ModelCheckpiont"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(r.err,
            "error: command line: trainer.callbacks[0]: unknown Callback class "
            "'lightning.pytorch.callbacks.model_checkpoint.ModelCheckpiont'; did you mean "
            "'lightning.pytorch.callbacks.ModelCheckpoint'?\n");
  // Several close names are all listed, closest first.
  r = run({"fit", "-c", boringConfig(), "--optimizer=torch.optim.Adamm"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(r.err,
            "error: command line: optimizer: unknown Optimizer class 'torch.optim.Adamm'; close matches: "
            "'torch.optim.Adam', 'torch.optim.AdamW'\n");
  // A path outside the packages of the rule says where paths resolve.
  r = run({"fit", "-c", boringConfig(), "--trainer.callbacks+=my_project.callbacks.ModelCheckpoint"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(r.err,
            "error: command line: trainer.callbacks[0]: unknown Callback class 'my_project.callbacks.ModelCheckpoint'; "
            "class paths resolve under lightning.pytorch, pytorch_lightning, lightning.fabric, lightning_fabric, "
            "lightning_habana, torch, transformers, deepspeed, pl_bolts, __main__; did you mean "
            "'lightning.pytorch.callbacks.ModelCheckpoint'?\n");
}

TEST_F(ClassPathsTest, AnySpellingIsTheSameClassWhenMerging) {
  // Naming the class again in another spelling keeps its init_args.
  YAML::Node cfg = YAML::Load(printConfig({"-c", lightningConfig(), "--optimizer=AdamW", "--model=BoringModel"}));
  EXPECT_EQ(cfg["optimizer"]["init_args"]["lr"].Scalar(), "0.01");
  write("short.yaml", "optimizer: {class_path: AdamW, init_args: {weight_decay: 0.5}}\n");
  cfg = YAML::Load(printConfig({"-c", lightningConfig(), "-c", "short.yaml"}));
  EXPECT_EQ(cfg["optimizer"]["init_args"]["lr"].Scalar(), "0.01");
  EXPECT_EQ(cfg["optimizer"]["init_args"]["weight_decay"].Scalar(), "0.5");
}

TEST_F(ClassPathsTest, PrintedConfigLoadsBackUnchanged) {
  const std::string printed = printConfig({"-c", lightningConfig()});
  write("printed.yaml", printed);
  EXPECT_EQ(printConfig({"-c", "printed.yaml"}), printed);
  // hpu-train's own classes print by their names.
  const std::string own = printConfig({"-c", boringConfig(), "--model=MLPClassifier", "--data=RandomDataModule"});
  EXPECT_EQ(YAML::Load(own)["model"]["class_path"].Scalar(), "MLPClassifier");
  EXPECT_EQ(YAML::Load(own)["data"]["class_path"].Scalar(), "RandomDataModule");
}

TEST_F(ClassPathsTest, GpuClassesRunAsTheirHpuCounterpartsWithANote) {
  RunResult r = run({"fit", "-c", boringConfig(), "--trainer.strategy=lightning.pytorch.strategies.DDPStrategy",
                     "--print_config"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(YAML::Load(r.out)["trainer"]["strategy"]["class_path"].Scalar(), "lightning_habana.HPUParallelStrategy");
  EXPECT_EQ(r.err,
            "warning: command line: trainer.strategy: 'lightning.pytorch.strategies.DDPStrategy' runs as "
            "lightning_habana.HPUParallelStrategy\n");
  r = run({"fit", "-c", boringConfig(), "--trainer.strategy=lightning.pytorch.strategies.DeepSpeedStrategy",
           "--print_config"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(YAML::Load(r.out)["trainer"]["strategy"]["class_path"].Scalar(), "lightning_habana.HPUDeepSpeedStrategy");
  EXPECT_EQ(r.err,
            "warning: command line: trainer.strategy: 'lightning.pytorch.strategies.DeepSpeedStrategy' runs as "
            "lightning_habana.HPUDeepSpeedStrategy\n");
}

}  // namespace
}  // namespace hpu::cli::testing
