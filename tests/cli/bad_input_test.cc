// Bad configs and command lines: each gets its exact message on stderr,
// exit code 2, nothing on stdout and nothing run; every problem of one run
// is reported together.
#include <filesystem>

#include "hpu_train_runner.h"

namespace hpu::cli::testing {
namespace {

class BadInputTest : public HpuTrainTest {
 protected:
  void expectRejected(const std::vector<std::string>& args, const std::string& expected_err) {
    const RunResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_EQ(r.err, expected_err);
    EXPECT_EQ(r.out, "");
    EXPECT_FALSE(std::filesystem::exists(dir() / "lightning_logs"));
  }
  // `fit -c boring.yaml <args>`
  void expectFitRejected(std::vector<std::string> args, const std::string& expected_err) {
    args.insert(args.begin(), {"fit", "-c", boringConfig()});
    expectRejected(args, expected_err);
  }
};

std::string nested(int depth) { return std::string(depth, '[') + "1" + std::string(depth, ']'); }

TEST_F(BadInputTest, YamlSyntaxErrorNamesFileLineAndColumn) {
  write("syntax.yaml", "trainer:\n  max_epochs: [1, 2\nmodel: BoringModel\n");
  expectRejected({"fit", "-c", "syntax.yaml"},
                 "error: syntax.yaml:3:6: invalid YAML: end of sequence flow not found\n");
  write("tab.yaml", "trainer:\n\tmax_epochs: 1\n");
  const RunResult r = run({"fit", "-c", "tab.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("error: tab.yaml:2:", 0), 0u) << r.err;
}

TEST_F(BadInputTest, DuplicateKeyNamesBothPlaces) {
  write("dup.yaml", "trainer:\n  max_epochs: 1\n  max_epochs: 2\nmodel: BoringModel\ndata: RandomDataModule\n");
  expectRejected({"fit", "-c", "dup.yaml"},
                 "error: dup.yaml:3:3: trainer.max_epochs: duplicate key (first defined at dup.yaml:2:15)\n");
}

TEST_F(BadInputTest, ADuplicateKeyDoesNotHideTheOtherProblems) {
  write("dup_and_more.yaml",
        "trainer:\n"
        "  max_step: 10\n"
        "  max_epochs: 1\n"
        "  max_epochs: 2\n"
        "model:\n"
        "  class_path: MLPClassifier\n"
        "  init_args:\n"
        "    dropout: .nan\n"
        "    lr: abc\n"
        "data: RandomDataModule\n"
        "optimizer:\n"
        "  class_path: SGD\n"
        "  init_args:\n"
        "    lr: -1\n");
  expectRejected({"fit", "-c", "dup_and_more.yaml"},
                 "error: dup_and_more.yaml:4:3: trainer.max_epochs: duplicate key (first defined at "
                 "dup_and_more.yaml:3:15)\n"
                 "error: dup_and_more.yaml:2:13: trainer.max_step: unknown key; did you mean 'max_steps'?\n"
                 "error: dup_and_more.yaml:8:14: model.init_args.dropout: expected a finite float, got '.nan'\n"
                 "error: dup_and_more.yaml:9:9: model.init_args.lr: expected float, got 'abc'\n"
                 "error: dup_and_more.yaml:14:9: optimizer.init_args.lr: -1 is out of range; must be > 0\n");
}

TEST_F(BadInputTest, NanOrInfinityWhereAFloatIsExpected) {
  write("nan.yaml", "model:\n  init_args:\n    lr: .nan\ntrainer:\n  gradient_clip_val: .inf\n");
  expectFitRejected({"-c", "nan.yaml"},
                    "error: nan.yaml:5:22: trainer.gradient_clip_val: expected a finite float, got '.inf'\n"
                    "error: nan.yaml:3:9: model.init_args.lr: expected a finite float, got '.nan'\n");
  expectFitRejected({"--model.lr=nan"},
                    "error: command line: model.init_args.lr: expected a finite float, got 'nan'\n");
}

TEST_F(BadInputTest, WrongTypeSaysWhatWasExpected) {
  write("abc.yaml", "model:\n  class_path: BoringModel\n  init_args:\n    lr: abc\n");
  expectFitRejected({"-c", "abc.yaml"}, "error: abc.yaml:4:9: model.init_args.lr: expected float, got 'abc'\n");
  expectFitRejected({"--trainer.max_epochs=1.5"}, "error: command line: trainer.max_epochs: expected int, got '1.5'\n");
  expectFitRejected(
      {"--trainer.enable_progress_bar=maybe"},
      "error: command line: trainer.enable_progress_bar: expected bool (true/false/yes/no), got 'maybe'\n");
  expectFitRejected({"--trainer.precision=bf17"},
                    "error: command line: trainer.precision: 'bf17' is not one of 32, 32-true, bf16, bf16-mixed, "
                    "bf16-true, 16, 16-mixed, fp8; did you mean 'bf16'?\n");
}

TEST_F(BadInputTest, OutOfRangeNamesTheBound) {
  write("range.yaml", "model:\n  init_args:\n    lr: -1\n");
  expectFitRejected({"-c", "range.yaml"},
                    "error: range.yaml:3:9: model.init_args.lr: -1 is out of range; must be > 0\n");
  // Keys of several types report the range of the type the value is spelled in.
  expectFitRejected({"--seed_everything=-3", "--trainer.devices=-2", "--trainer.limit_train_batches=1.5"},
                    "error: command line: seed_everything: -3 is out of range; must be >= 0\n"
                    "error: command line: trainer.devices: -2 is out of range; must be >= -1\n"
                    "error: command line: trainer.limit_train_batches: 1.5 is out of range; must be <= 1\n");
}

TEST_F(BadInputTest, UnknownKeySuggestsTheClosest) {
  write("typo.yaml", "trainer:\n  max_epoch: 3\n");
  expectFitRejected({"-c", "typo.yaml"},
                    "error: typo.yaml:2:14: trainer.max_epoch: unknown key; did you mean 'max_epochs'?\n");
  expectFitRejected({"--model.init_args.out_feature=3"},
                    "error: command line: model.init_args.out_feature: unknown key; did you mean 'out_features'?\n");
}

// A strategy name (Lightning's or lightning-habana's) takes no keys: with
// keys, the error says to name a class.
TEST_F(BadInputTest, AStrategyNameWithKeysIsToldToNameAClass) {
  const std::string classes =
      "(registered: HPUDeepSpeedStrategy, HPUFSDPStrategy, HPUParallelStrategy, ModelParallelStrategy, "
      "SingleHPUStrategy)\n";
  expectFitRejected({"--trainer.strategy=fsdp", "--trainer.strategy.sharding_strategy=HYBRID_SHARD"},
                    "error: command line: trainer.strategy: 'fsdp' is one of its names, which take no keys; to set "
                    "keys, name a Strategy class " + classes);
  write("ds.yaml", "trainer:\n  strategy:\n    class_path: hpu_deepspeed_stage_3\n    init_args: {offload_optimizer: true}\n");
  expectFitRejected({"-c", "ds.yaml"},
                    "error: ds.yaml:3:17: trainer.strategy: 'hpu_deepspeed_stage_3' is one of its names, which take "
                    "no keys; to set keys, name a Strategy class " + classes);
}

TEST_F(BadInputTest, UnknownClassSuggestsTheClosest) {
  expectFitRejected({"--data=RandomDataModul"},
                    "error: command line: data: unknown DataModule class 'RandomDataModul'; did you mean "
                    "'RandomDataModule'?\n");
  // Without a close match, the registered classes are listed.
  expectFitRejected({"--data=ImageNet"},
                    "error: command line: data: unknown DataModule class 'ImageNet' (registered: "
                    "BoringDataModule, CSVDataModule, FashionMNISTDataModule, InstructionDataModule, MNISTDataModule, "
                    "RandomDataModule, RandomTokensDataModule, TextDataModule)\n");
  write("cb.yaml", "trainer:\n  callbacks:\n    - class_path: lightning.pytorch.callbacks.EarlyStoping\n");
  const RunResult r = run({"fit", "-c", boringConfig(), "-c", "cb.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "error: cb.yaml:3:19: trainer.callbacks[0]: unknown Callback class "
            "'lightning.pytorch.callbacks.EarlyStoping'; did you mean 'lightning.pytorch.callbacks.EarlyStopping'?\n");
}

TEST_F(BadInputTest, EveryProblemOfOneRunIsReportedTogether) {
  write("bad.yaml",
        "trainer:\n"
        "  max_epoch: 3\n"
        "  gradient_clip_val: .nan\n"
        "model:\n"
        "  class_path: MLPClassifier\n"
        "  init_args:\n"
        "    lr: abc\n"
        "    dropout: -1\n"
        "data: RandomDataModul\n"
        "optimizer:\n"
        "  class_path: SGD\n"
        "  init_args:\n"
        "    lr: -1\n");
  expectRejected({"fit", "-c", "bad.yaml", "--trainer.devices=x"},
                 "error: bad.yaml:2:14: trainer.max_epoch: unknown key; did you mean 'max_epochs'?\n"
                 "error: command line: trainer.devices: expected int | {auto} | list[int], got 'x'\n"
                 "error: bad.yaml:3:22: trainer.gradient_clip_val: expected a finite float, got '.nan'\n"
                 "error: bad.yaml:8:14: model.init_args.dropout: -1 is out of range; must be >= 0\n"
                 "error: bad.yaml:7:9: model.init_args.lr: expected float, got 'abc'\n"
                 "error: bad.yaml:9:7: data: unknown DataModule class 'RandomDataModul'; did you mean "
                 "'RandomDataModule'?\n"
                 "error: bad.yaml:13:9: optimizer.init_args.lr: -1 is out of range; must be > 0\n");
  // Problems of loading are gathered across files too.
  write("dup.yaml", "a: 1\na: 2\n");
  write("syntax.yaml", "trainer: {max_epochs: 1\n");
  expectRejected({"fit", "-c", "dup.yaml", "-c", "missing.yaml", "-c", "syntax.yaml"},
                 "error: dup.yaml:2:1: a: duplicate key (first defined at dup.yaml:1:4)\n"
                 "error: cannot read config file 'missing.yaml': No such file or directory\n"
                 "error: syntax.yaml:2:1: invalid YAML: end of map flow not found\n"
                 "error: dup.yaml:1:4: a: unknown key\n");
}

TEST_F(BadInputTest, ASyntaxErrorInOneFileDoesNotHideTheOtherFilesProblems) {
  write("bad.yaml",
        "trainer:\n"
        "  max_epoch: 3\n"
        "  devices: two\n"
        "model:\n"
        "  class_path: BoringModel\n");
  write("syntax.yaml", "data:\n  class_path: RandomDataModule\n  init_args: {size: 32\nseed_everything: 1\n");
  expectRejected({"fit", "-c", "bad.yaml", "-c", "syntax.yaml", "--trainer.max_steps=abc"},
                 "error: syntax.yaml:4:16: invalid YAML: end of map flow not found\n"
                 "error: bad.yaml:2:14: trainer.max_epoch: unknown key; did you mean 'max_epochs'?\n"
                 "error: bad.yaml:3:12: trainer.devices: expected int | {auto} | list[int], got 'two'\n"
                 "error: command line: trainer.max_steps: expected int, got 'abc'\n");
  // What the unreadable file may hold is not reported missing: here the
  // model's class, which bad_model.yaml only gives init_args for.
  write("bad_model.yaml", "model:\n  init_args: {lr: 0.2}\ntrainer:\n  max_epoch: 2\n");
  expectRejected({"fit", "-c", "syntax.yaml", "-c", "bad_model.yaml"},
                 "error: syntax.yaml:4:16: invalid YAML: end of map flow not found\n"
                 "error: bad_model.yaml:4:14: trainer.max_epoch: unknown key; did you mean 'max_epochs'?\n");
}

TEST_F(BadInputTest, MissingConfigFile) {
  expectRejected({"fit", "-c", "missing.yaml"},
                 "error: cannot read config file 'missing.yaml': No such file or directory\n");
  expectRejected({"fit", "-c", "."}, "error: cannot read config file '.': it is a directory\n");
}

TEST_F(BadInputTest, OversizedFileIsRefusedBeforeParsing) {
  write("big.yaml", "model: BoringModel\n# " + std::string((4 << 20) - 21, 'x') + "\n");
  expectRejected({"fit", "-c", "big.yaml"}, "error: big.yaml: config file is 4194305 bytes; the limit is 4194304\n");
}

TEST_F(BadInputTest, ExcessiveNestingIsRefused) {
  // The document's maps count: the 63rd bracket after "trainer:" and "devices:" is level 65.
  write("deep.yaml", "trainer:\n  devices: " + nested(70) + "\n");
  expectRejected({"fit", "-c", "deep.yaml"}, "error: deep.yaml:2:74: nesting deeper than 64 levels\n");
  // Far deeper than yaml-cpp's own recursion guard: still the same message.
  write("deeper.yaml", "trainer: " + nested(5000) + "\n");
  expectRejected({"fit", "-c", "deeper.yaml"}, "error: deeper.yaml:1:73: nesting deeper than 64 levels\n");
  expectFitRejected({"--trainer.devices=" + nested(80)},
                    "error: command line (--trainer.devices):1:65: nesting deeper than 64 levels\n");
}

TEST_F(BadInputTest, MisplacedOptionSaysWhereItBelongs) {
  expectRejected({"fit", "--version"}, "error: --version belongs before the subcommand: hpu-train --version\n");
  expectRejected({"fit", "-c", boringConfig(), "--verbose"},
                 "error: --verbose belongs before the subcommand: hpu-train --verbose fit ...\n");
  expectRejected({"devices", "--trainer.devices=2"},
                 "error: --trainer.devices=2 belongs to the fit, validate, test, predict, estimate and export "
                 "subcommands, not 'devices'\n");
  expectRejected({"-c", boringConfig(), "devices"},
                 "error: --config belongs to the fit, validate, test, predict, estimate and export subcommands, not "
                 "'devices'\n");
  expectRejected({"--print_config", "devices"},
                 "error: --print_config belongs to the fit, validate, test, predict, estimate and export subcommands, "
                 "not 'devices'\n");
}

TEST_F(BadInputTest, MissingOrUnknownSubcommand) {
  expectRejected({},
                 "error: missing subcommand: hpu-train fit|validate|test|predict|estimate|export|devices|consolidate|"
                 "plot [OPTIONS] (hpu-train --help lists them)\n");
  expectRejected({"-c", boringConfig()},
                 "error: missing subcommand before the options: hpu-train fit|validate|test|predict|estimate|export "
                 "--config FILE\n");
  expectRejected({"--trainer.max_epochs=3"},
                 "error: missing subcommand before the options: hpu-train fit|validate|test|predict|estimate|export "
                 "--trainer.max_epochs=3\n");
  expectRejected({"fti", "-c", boringConfig()},
                 "error: unknown subcommand 'fti'; did you mean 'fit'? (subcommands: fit, validate, test, predict, "
                 "estimate, export, devices, consolidate, plot)\n");
}

TEST_F(BadInputTest, PrintConfigFlagsAreChecked) {
  expectFitRejected({"--print_config=bogus"},
                    "error: --print_config: unknown flag 'bogus' (flags: skip_default, skip_null, comments)\n");
  expectFitRejected({"--print_config=skip_null,skip_defaults"},
                    "error: --print_config: unknown flag 'skip_defaults'; did you mean 'skip_default'? (flags: "
                    "skip_default, skip_null, comments)\n");
}

TEST_F(BadInputTest, ValueMissingAfterAnOption) {
  expectFitRejected({"--trainer.max_epochs"},
                    "error: option '--trainer.max_epochs' needs a value: --trainer.max_epochs=VALUE\n");
  expectFitRejected({"--trainer.max_epochs", "--trainer.devices=1"},
                    "error: option '--trainer.max_epochs' needs a value: --trainer.max_epochs=VALUE\n");
  expectRejected({"fit", "-c"}, "error: --config: 1 required FILE missing\n");
  expectFitRejected({"boring.yaml"},
                    "error: unexpected argument 'boring.yaml'; options are written --key=value or "
                    "--key value\n");
}

TEST_F(BadInputTest, AppendedKeysNeedAnItem) {
  expectFitRejected({"--trainer.callbacks.patience=5"},
                    "error: command line: trainer.callbacks.patience: the list is empty; add an item first with "
                    "--trainer.callbacks+=<ClassName>\n");
}

TEST_F(BadInputTest, ExportAndRunsWithoutDataSayWhatTheyNeed) {
  expectRejected({"export", "--ckpt_path", "last", "--output", "hf"},
                 "error: --ckpt_path last: no last.ckpt under ./lightning_logs; give the checkpoint file\n");
  expectRejected({"export", "--ckpt_path", "runs/last.ckpt", "--output", "hf"},
                 "error: command line: --ckpt_path: no such file: " + (dir() / "runs/last.ckpt").string() +
                     " (a relative path given here is read from the working directory)\n");
  expectRejected({"consolidate", "best", "whole.ckpt"},
                 "error: consolidate INPUT best: no last.ckpt under ./lightning_logs; give the checkpoint file\n");
  expectRejected({"export", "--output", "hf"}, "error: --ckpt_path is required\n");
  write("nodata.yaml", "trainer: {devices: 1}\nmodel: BoringModel\n");
  expectRejected({"fit", "-c", "nodata.yaml"},
                 "error: data: missing; fit needs a DataModule class (--data TextDataModule, data: {class_path: ..., "
                 "init_args: ...}); only predict runs without one, on the prompts of the model's init_args\n");
}

}  // namespace

}  // namespace hpu::cli::testing
