// Every form of command-line override, seen through `fit --print_config`:
// --key=value and --key value, bool words, null, lists, list append with the
// appended item's own keys, dict items, and the component shorthands.
#include <gmock/gmock.h>
#include <yaml-cpp/yaml.h>

#include "hpu_train_runner.h"

namespace hpu::cli::testing {
namespace {

class OverrideFormsTest : public HpuTrainTest {
 protected:
  // The resolved config of boring.yaml plus `args`.
  YAML::Node resolved(const std::vector<std::string>& args) {
    std::vector<std::string> all{"-c", boringConfig()};
    all.insert(all.end(), args.begin(), args.end());
    return YAML::Load(printConfig(all));
  }
};

std::vector<std::string> ints(const YAML::Node& seq) {
  std::vector<std::string> out;
  for (const auto& i : seq) out.push_back(i.Scalar());
  return out;
}

TEST_F(OverrideFormsTest, EqualsAndSpaceFormsSetTheSameValue) {
  const std::string base = printConfig({"-c", boringConfig()});
  const std::string equals = printConfig({"-c", boringConfig(), "--trainer.max_epochs=5"});
  const std::string spaced = printConfig({"-c", boringConfig(), "--trainer.max_epochs", "5"});
  EXPECT_EQ(equals, spaced);
  EXPECT_NE(equals, base);
  EXPECT_EQ(YAML::Load(equals)["trainer"]["max_epochs"].Scalar(), "5");
  EXPECT_TRUE(YAML::Load(base)["trainer"]["max_epochs"].IsNull());
}

TEST_F(OverrideFormsTest, BoolWordsInEitherCase) {
  YAML::Node t = resolved({"--trainer.enable_progress_bar=no", "--trainer.enable_model_summary", "False",
                           "--trainer.deterministic=yes", "--trainer.use_distributed_sampler=NO"})["trainer"];
  EXPECT_EQ(t["enable_progress_bar"].Scalar(), "false");
  EXPECT_EQ(t["enable_model_summary"].Scalar(), "false");
  EXPECT_EQ(t["deterministic"].Scalar(), "true");
  EXPECT_EQ(t["use_distributed_sampler"].Scalar(), "false");
  t = resolved({"--trainer.enable_progress_bar=false", "--trainer.enable_progress_bar=true", "--trainer.deterministic",
                "true", "--trainer.enable_model_summary=Yes"})["trainer"];
  EXPECT_EQ(t["enable_progress_bar"].Scalar(), "true");  // the later flag wins
  EXPECT_EQ(t["deterministic"].Scalar(), "true");
  EXPECT_EQ(t["enable_model_summary"].Scalar(), "true");
}

TEST_F(OverrideFormsTest, NullClearsAKeyWithANonNullDefault) {
  YAML::Node t = resolved({"--trainer.check_val_every_n_epoch=null", "--trainer.log_every_n_steps", "null"})["trainer"];
  EXPECT_TRUE(t["check_val_every_n_epoch"].IsNull());
  EXPECT_TRUE(t["log_every_n_steps"].IsNull());
  EXPECT_EQ(resolved({})["trainer"]["check_val_every_n_epoch"].Scalar(), "1");
}

TEST_F(OverrideFormsTest, ListValues) {
  YAML::Node devices = resolved({"--trainer.devices=[0,1]"})["trainer"]["devices"];
  ASSERT_TRUE(devices.IsSequence());
  EXPECT_EQ(ints(devices), (std::vector<std::string>{"0", "1"}));
  devices = resolved({"--trainer.devices", "[3, 5, 7]"})["trainer"]["devices"];
  EXPECT_EQ(ints(devices), (std::vector<std::string>{"3", "5", "7"}));
  // The other alternatives of trainer.devices: a count and "auto".
  EXPECT_EQ(resolved({"--trainer.devices=2"})["trainer"]["devices"].Scalar(), "2");
  EXPECT_EQ(resolved({"--trainer.devices=auto"})["trainer"]["devices"].Scalar(), "auto");
}

TEST_F(OverrideFormsTest, AppendedCallbackTakesTheKeysThatFollowIt) {
  YAML::Node cbs = resolved({"--trainer.callbacks+=EarlyStopping", "--trainer.callbacks.patience=5",
                             "--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.save_top_k", "2",
                             "--trainer.callbacks.monitor=val_loss"})["trainer"]["callbacks"];
  ASSERT_TRUE(cbs.IsSequence());
  ASSERT_EQ(cbs.size(), 2u);
  EXPECT_EQ(cbs[0]["class_path"].Scalar(), "lightning.pytorch.callbacks.EarlyStopping");
  EXPECT_EQ(cbs[0]["init_args"]["patience"].Scalar(), "5");
  EXPECT_EQ(cbs[0]["init_args"]["monitor"].Scalar(), "val_loss");  // its default
  EXPECT_EQ(cbs[1]["class_path"].Scalar(), "lightning.pytorch.callbacks.ModelCheckpoint");
  EXPECT_EQ(cbs[1]["init_args"]["save_top_k"].Scalar(), "2");
  EXPECT_EQ(cbs[1]["init_args"]["monitor"].Scalar(), "val_loss");
  EXPECT_FALSE(cbs[1]["init_args"]["patience"].IsDefined());
}

TEST_F(OverrideFormsTest, AppendGoesAfterTheCallbacksOfTheConfig) {
  write("callbacks.yaml",
        "trainer:\n"
        "  callbacks:\n"
        "    - class_path: ModelCheckpoint\n"
        "      init_args:\n"
        "        save_top_k: 3\n");
  YAML::Node cbs =
      resolved({"-c", "callbacks.yaml", "--trainer.callbacks+=EarlyStopping", "--trainer.callbacks.patience=5",
                "--trainer.callbacks.0.save_last=true"})["trainer"]["callbacks"];
  ASSERT_EQ(cbs.size(), 2u);
  EXPECT_EQ(cbs[0]["class_path"].Scalar(), "lightning.pytorch.callbacks.ModelCheckpoint");
  EXPECT_EQ(cbs[0]["init_args"]["save_top_k"].Scalar(), "3");
  EXPECT_EQ(cbs[0]["init_args"]["save_last"].Scalar(), "true");  // by index
  EXPECT_EQ(cbs[1]["class_path"].Scalar(), "lightning.pytorch.callbacks.EarlyStopping");
  EXPECT_EQ(cbs[1]["init_args"]["patience"].Scalar(), "5");
}

TEST_F(OverrideFormsTest, DictItemOfInitArgs) {
  YAML::Node args = resolved({"--model", "MLPClassifier", "--model.init_args.hidden=[64,32]",
                              "--model.init_args.dropout", "0.5"})["model"]["init_args"];
  EXPECT_EQ(ints(args["hidden"]), (std::vector<std::string>{"64", "32"}));
  EXPECT_EQ(args["dropout"].Scalar(), "0.5");
  EXPECT_EQ(args["activation"].Scalar(), "relu");
}

TEST_F(OverrideFormsTest, ModelShorthandImpliesInitArgs) {
  YAML::Node model = resolved({"--model", "MLPClassifier", "--model.lr", "0.1"})["model"];
  EXPECT_EQ(model["class_path"].Scalar(), "MLPClassifier");
  EXPECT_EQ(model["init_args"]["lr"].Scalar(), "0.1");
  EXPECT_EQ(model["init_args"]["dropout"].Scalar(), "0.2");  // the rest from MLPClassifier's defaults
  EXPECT_EQ(ints(model["init_args"]["hidden"]), (std::vector<std::string>{"256", "128"}));
  EXPECT_FALSE(model["init_args"]["out_features"].IsDefined());  // nothing left of boring.yaml's BoringModel
}

TEST_F(OverrideFormsTest, OptimizerAndSchedulerGroups) {
  YAML::Node cfg = resolved({"--optimizer", "AdamW", "--optimizer.lr", "1e-3", "--lr_scheduler", "StepLR",
                             "--lr_scheduler.step_size", "1", "--lr_scheduler.gamma=0.5"});
  EXPECT_EQ(cfg["optimizer"]["class_path"].Scalar(), "torch.optim.AdamW");
  EXPECT_EQ(cfg["optimizer"]["init_args"]["lr"].Scalar(), "0.001");  // canonical spelling
  EXPECT_EQ(cfg["optimizer"]["init_args"]["weight_decay"].Scalar(), "0.01");
  EXPECT_EQ(ints(cfg["optimizer"]["init_args"]["betas"]), (std::vector<std::string>{"0.9", "0.999"}));
  EXPECT_EQ(cfg["lr_scheduler"]["class_path"].Scalar(), "torch.optim.lr_scheduler.StepLR");
  EXPECT_EQ(cfg["lr_scheduler"]["init_args"]["step_size"].Scalar(), "1");
  EXPECT_EQ(cfg["lr_scheduler"]["init_args"]["gamma"].Scalar(), "0.5");
  cfg = resolved({"--lr_scheduler=StepLR", "--lr_scheduler.step_size=4", "--optimizer=SGD"});
  EXPECT_EQ(cfg["lr_scheduler"]["init_args"]["step_size"].Scalar(), "4");
  EXPECT_EQ(cfg["optimizer"]["init_args"]["momentum"].Scalar(), "0.0");
}

TEST_F(OverrideFormsTest, ComponentAsAFlowMapping) {
  YAML::Node logger =
      resolved({"--trainer.logger={class_path: CSVLogger, init_args: {version: 3}}"})["trainer"]["logger"];
  EXPECT_EQ(logger["class_path"].Scalar(), "lightning.pytorch.loggers.CSVLogger");
  EXPECT_EQ(logger["init_args"]["version"].Scalar(), "3");
  EXPECT_EQ(logger["init_args"]["name"].Scalar(), "lightning_logs");
}

}  // namespace
}  // namespace hpu::cli::testing

namespace hpu::cli::testing {
namespace {

// A profiler's short name followed by one of its class's keys: the name
// becomes the class with its defaults, then the key applies (LightningCLI).
TEST_F(OverrideFormsTest, AProfilerShortNameTakesItsClassKeys) {
  YAML::Node p = resolved({"--trainer.profiler=pytorch", "--trainer.profiler.row_limit=5"})["trainer"]["profiler"];
  EXPECT_EQ(p["class_path"].Scalar(), "lightning.pytorch.profilers.PyTorchProfiler");
  EXPECT_EQ(p["init_args"]["row_limit"].Scalar(), "5");
  EXPECT_EQ(p["init_args"]["export_to_chrome"].Scalar(), "true");
  p = resolved({"--trainer.profiler=simple", "--trainer.profiler.extended=false"})["trainer"]["profiler"];
  EXPECT_EQ(p["class_path"].Scalar(), "lightning.pytorch.profilers.SimpleProfiler");
  EXPECT_EQ(p["init_args"]["extended"].Scalar(), "false");
  // The name alone stays the name, as Lightning prints it.
  EXPECT_EQ(resolved({"--trainer.profiler=advanced"})["trainer"]["profiler"].Scalar(), "advanced");
  // A key the class lacks is named with the class's keys.
  const RunResult r = run({"fit", "-c", boringConfig(), "--trainer.profiler=pytorch", "--trainer.profiler.row_limt=5",
                           "--print_config"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, ::testing::HasSubstr("trainer.profiler.init_args.row_limt: unknown key; did you mean 'row_limit'?"));
}

}  // namespace
}  // namespace hpu::cli::testing
