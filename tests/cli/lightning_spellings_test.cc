// Lightning's defaults and spellings: null where Lightning means a default,
// torch's init_args as print_config writes them (the ones that would change
// the math refused by name), format strings on the command line, and GPU
// configs (accelerators refused in one message, strategies mapped).
#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "hpu_train_runner.h"

namespace hpu::cli::testing {
namespace {

using LightningSpellingsTest = HpuTrainTest;

TEST_F(LightningSpellingsTest, PrecisionNullIs32TrueAndLoggerNullIsTheDefaultLogger) {
  YAML::Node t = YAML::Load(printConfig({"-c", boringConfig()}))["trainer"];
  EXPECT_TRUE(t["precision"].IsNull());  // as LightningCLI prints Trainer's defaults
  EXPECT_TRUE(t["logger"].IsNull());
  const RunResult r = run({"fit", "-c", boringConfig(), "--trainer.precision=null", "--trainer.logger=null",
                           "--trainer.max_epochs=1", "--trainer.limit_train_batches=2", "--trainer.limit_val_batches=1"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  // The default logger wrote its files.
  EXPECT_TRUE(std::filesystem::exists(dir() / "lightning_logs/version_0/metrics.csv")) << r.describe();
  // 32-true: nothing ran in a lower precision, so the run reports no precision summary.
  EXPECT_EQ(r.out.find("bf16"), std::string::npos) << r.out;
  // false turns logging off.
  const RunResult off = run({"fit", "-c", boringConfig(), "--trainer.logger=false", "--trainer.max_epochs=1",
                             "--trainer.limit_train_batches=1", "--trainer.limit_val_batches=1",
                             "--trainer.default_root_dir=off"});
  ASSERT_EQ(off.exit_code, 0) << off.describe();
  EXPECT_FALSE(std::filesystem::exists(dir() / "off/lightning_logs"));
}

TEST_F(LightningSpellingsTest, TorchInitArgsThatKeepTheMathAreAcceptedAndPrinted) {
  write("adamw.yaml",
        "optimizer:\n"
        "  class_path: torch.optim.AdamW\n"
        "  init_args:\n"
        "    lr: 0.001\n"
        "    betas: [0.9, 0.999]\n"
        "    eps: 1.0e-08\n"
        "    weight_decay: 0.01\n"
        "    amsgrad: false\n"
        "    maximize: false\n"
        "    foreach: true\n"
        "    capturable: false\n"
        "    differentiable: false\n"
        "    fused: null\n"
        "lr_scheduler:\n"
        "  class_path: torch.optim.lr_scheduler.StepLR\n"
        "  init_args:\n"
        "    step_size: 2\n"
        "    gamma: 0.1\n"
        "    last_epoch: -1\n"
        "    verbose: deprecated\n");
  const std::string printed = printConfig({"-c", boringConfig(), "-c", "adamw.yaml"});
  YAML::Node cfg = YAML::Load(printed);
  EXPECT_EQ(cfg["optimizer"]["init_args"]["foreach"].Scalar(), "true");
  EXPECT_TRUE(cfg["optimizer"]["init_args"]["fused"].IsNull());
  EXPECT_EQ(cfg["optimizer"]["init_args"]["maximize"].Scalar(), "false");
  EXPECT_EQ(cfg["lr_scheduler"]["init_args"]["last_epoch"].Scalar(), "-1");
  // torch 2.13 has no `verbose`: accepted (torch < 2.7 printed it), printed only when set.
  EXPECT_FALSE(cfg["lr_scheduler"]["init_args"]["verbose"]);
  // torch's order of the keys, as print_config writes them.
  std::vector<std::string> keys;
  for (const auto& kv : cfg["optimizer"]["init_args"]) keys.push_back(kv.first.Scalar());
  EXPECT_EQ(keys, (std::vector<std::string>{"lr", "betas", "eps", "weight_decay", "amsgrad", "maximize", "foreach",
                                            "capturable", "differentiable", "fused"}));
  const RunResult r = run({"fit", "-c", boringConfig(), "-c", "adamw.yaml", "--trainer.max_epochs=1",
                           "--trainer.limit_train_batches=2", "--trainer.limit_val_batches=1"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
}

TEST_F(LightningSpellingsTest, TorchInitArgsThatWouldChangeTheMathAreRefusedWithTheReason) {
  RunResult r = run({"fit", "-c", boringConfig(), "--optimizer=torch.optim.SGD", "--optimizer.maximize=true",
                     "--optimizer.differentiable=true"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(r.err,
            "error: command line: optimizer.init_args.maximize: only the default (false) is supported: hpu-train's "
            "optimizers minimize the loss; return its negative from the model instead\n"
            "error: command line: optimizer.init_args.differentiable: only the default (false) is supported: "
            "hpu-train does not differentiate through optimizer steps (no higher-order training)\n");
  r = run({"fit", "-c", boringConfig(), "--optimizer=Adam", "--optimizer.capturable=true"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(r.err,
            "error: command line: optimizer.init_args.capturable: only the default (false) is supported: CUDA graph "
            "capture of the optimizer step has no HPU counterpart; lazy mode records the step's graph itself\n");
  r = run({"fit", "-c", boringConfig(), "--optimizer=SGD", "--lr_scheduler=StepLR", "--lr_scheduler.last_epoch=3"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(r.err,
            "error: command line: lr_scheduler.init_args.last_epoch: only the default (-1) is supported: resuming a "
            "schedule is ckpt_path's job, which restores the scheduler's state\n");
}

TEST_F(LightningSpellingsTest, SchedulerVerbosePrintsTorchsLines) {
  const RunResult r = run({"fit", "-c", boringConfig(), "--optimizer=SGD", "--optimizer.lr=0.1",
                           "--lr_scheduler=StepLR", "--lr_scheduler.step_size=1", "--lr_scheduler.gamma=0.5",
                           "--lr_scheduler.verbose=true", "--trainer.max_epochs=2", "--trainer.limit_train_batches=1",
                           "--trainer.limit_val_batches=0", "--trainer.enable_progress_bar=false",
                           "--trainer.enable_model_summary=false"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  // One line on construction, one per epoch (then the device's summary).
  EXPECT_EQ(r.out.rfind("Adjusting learning rate of group 0 to 1.0000e-01.\n"
                        "Adjusting learning rate of group 0 to 5.0000e-02.\n"
                        "Adjusting learning rate of group 0 to 2.5000e-02.\n"
                        "hpu:0 lazy mode:",
                        0),
            0u)
      << r.out;
}

TEST_F(LightningSpellingsTest, FormatStringsWorkOnTheCommandLine) {
  YAML::Node cfg = YAML::Load(printConfig({"-c", boringConfig(), "--trainer.callbacks+=ModelCheckpoint",
                                           "--trainer.callbacks.filename={epoch}-{val_loss:.2f}"}));
  EXPECT_EQ(cfg["trainer"]["callbacks"][0]["init_args"]["filename"].Scalar(), "{epoch}-{val_loss:.2f}");
  cfg = YAML::Load(printConfig({"-c", boringConfig(), "--trainer.callbacks+=ModelCheckpoint",
                                "--trainer.callbacks.filename={epoch}"}));
  EXPECT_EQ(cfg["trainer"]["callbacks"][0]["init_args"]["filename"].Scalar(), "{epoch}");
  // The checkpoint gets that name.
  const RunResult r = run({"fit", "-c", boringConfig(), "--trainer.callbacks+=ModelCheckpoint",
                           "--trainer.callbacks.filename={epoch}-{val_loss:.2f}", "--trainer.max_epochs=1",
                           "--trainer.limit_train_batches=2", "--trainer.limit_val_batches=1"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  bool found = false;
  for (const auto& e : std::filesystem::directory_iterator(dir() / "lightning_logs/version_0/checkpoints"))
    found = found || e.path().filename().string().rfind("epoch=0-val_loss=", 0) == 0;
  EXPECT_TRUE(found);
  // A key that takes no text still reports what YAML made of the value.
  const RunResult bad = run({"fit", "-c", boringConfig(), "--trainer.max_epochs={epoch}"});
  EXPECT_EQ(bad.exit_code, 2) << bad.describe();
  EXPECT_EQ(bad.err, "error: command line: trainer.max_epochs: expected Optional[int], got a mapping\n");
}

TEST_F(LightningSpellingsTest, GpuAcceleratorsAreRefusedInOneMessage) {
  for (const char* accelerator : {"gpu", "cuda", "cpu", "mps"}) {
    const RunResult r = run({"fit", "-c", boringConfig(), std::string("--trainer.accelerator=") + accelerator});
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_EQ(r.err, std::string("error: command line: trainer.accelerator: '") + accelerator +
                         "': hpu-train runs on the emulated HPU; use auto or hpu\n");
  }
}

TEST_F(LightningSpellingsTest, GpuStrategiesRunAsLightningHabanaRewritesThem) {
  const std::pair<const char*, const char*> cases[] = {{"ddp", "hpu_parallel"},
                                                       {"ddp_spawn", "hpu_parallel"},
                                                       {"deepspeed_stage_2", "hpu_deepspeed_stage_2"},
                                                       {"deepspeed_stage_3_offload", "hpu_deepspeed_stage_3_offload"}};
  for (const auto& [gpu, hpu] : cases) {
    const RunResult r = run({"fit", "-c", boringConfig(), std::string("--trainer.strategy=") + gpu, "--print_config"});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(YAML::Load(r.out)["trainer"]["strategy"].Scalar(), hpu);
    EXPECT_EQ(r.err, std::string("warning: command line: trainer.strategy: '") + gpu + "' runs as " + hpu +
                         " (lightning-habana's name for it)\n");
  }
  // A run warns once (rank 0), then trains.
  const RunResult run2 = run({"fit", "-c", boringConfig(), "--trainer.strategy=ddp", "--trainer.max_epochs=1",
                              "--trainer.limit_train_batches=1", "--trainer.limit_val_batches=0"});
  ASSERT_EQ(run2.exit_code, 0) << run2.describe();
  EXPECT_NE(run2.err.find("warning: command line: trainer.strategy: 'ddp' runs as hpu_parallel"), std::string::npos)
      << run2.err;
}

TEST_F(LightningSpellingsTest, HelpOffersOnlyWhatWorks) {
  const RunResult r = run({"fit", "--help"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("  {auto|hpu} | Accelerator = auto\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("{auto|hpu|cpu}"), std::string::npos);
  EXPECT_EQ(r.out.find("|ddp"), std::string::npos);
}

}  // namespace
}  // namespace hpu::cli::testing
