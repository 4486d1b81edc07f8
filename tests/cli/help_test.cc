// What a user reads: --help at the top and per subcommand (every config key
// with its type and default), --version, and the `devices` listing.
#include <algorithm>
#include <iostream>
#include <regex>
#include <sstream>

#include "hpu_train_runner.h"

namespace hpu::cli::testing {
namespace {

using HelpTest = HpuTrainTest;

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream s(text);
  for (std::string line; std::getline(s, line);) out.push_back(line);
  return out;
}

// The line of `--KEY` with its type and default, and the doc line under it;
// both empty if absent. With `component`, searches from that class's heading
// ("  MLPClassifier" or "  AdamW  (also: ...)").
std::pair<std::string, std::string> keyHelp(const std::string& help, const std::string& key,
                                            const std::string& component = "") {
  const auto lines = linesOf(help);
  std::size_t i = 0;
  if (!component.empty())
    while (i < lines.size() && lines[i] != "  " + component && lines[i].rfind("  " + component + "  (", 0) != 0) ++i;
  const std::regex key_line("^ +--" + std::regex_replace(key, std::regex(R"([.\[\]])"), R"(\$&)") + " +.*$");
  for (; i + 1 < lines.size(); ++i)
    if (std::regex_match(lines[i], key_line)) return {lines[i], lines[i + 1]};
  return {};
}

// "  --trainer.max_epochs      Optional[int] = null" -> "Optional[int] = null"
std::string typeAndDefault(const std::string& key_line) {
  std::smatch m;
  return std::regex_match(key_line, m, std::regex(R"(^ +--\S+ +(.*)$)")) ? m[1].str() : "";
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b);
}

TEST_F(HelpTest, TopLevelHelpListsSubcommandsAndOptions) {
  const RunResult r = run({"--help"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (const char* sub : {"fit", "validate", "test", "predict", "devices"})
    EXPECT_TRUE(std::regex_search(r.out, std::regex(std::string("\n  ") + sub + " +\\S"))) << sub << "\n" << r.out;
  for (const char* opt :
       {"--version", "-c,--config FILE", "--print_config [=FLAGS]", "--save_config_overwrite", "-v,--verbose"})
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt;
}

TEST_F(HelpTest, FitHelpListsEveryGroupWithTypeAndDefault) {
  const RunResult r = run({"fit", "--help"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::cout << "[ info ] hpu-train fit --help took " << r.wall.count() * 1e3 << " ms (wall, including process start)\n";
  const std::string& h = r.out;
  EXPECT_EQ(typeAndDefault(keyHelp(h, "trainer.max_epochs").first), "Optional[int] = null");
  EXPECT_EQ(trim(keyHelp(h, "trainer.max_epochs").second),
            "Stop after this many epochs (null: 1000 unless max_steps is set; -1: no limit).");
  EXPECT_EQ(typeAndDefault(keyHelp(h, "trainer.devices").first), "int | {auto} | list[int] = auto");
  EXPECT_EQ(typeAndDefault(keyHelp(h, "trainer.accumulate_grad_batches").first), "int = 1");
  EXPECT_EQ(typeAndDefault(keyHelp(h, "trainer.callbacks").first), "Optional[list[Callback] | Callback] = null");
  EXPECT_EQ(typeAndDefault(keyHelp(h, "seed_everything").first), "bool | int = true");
  EXPECT_EQ(typeAndDefault(keyHelp(h, "model").first), "Model = null");
  // Component keys appear under their class, with that class's defaults.
  EXPECT_EQ(typeAndDefault(keyHelp(h, "model.lr", "BoringModel").first), "float = 0.1");
  EXPECT_EQ(typeAndDefault(keyHelp(h, "model.lr", "MLPClassifier").first), "float = 0.001");
  EXPECT_EQ(typeAndDefault(keyHelp(h, "model.hidden", "MLPClassifier").first), "list[int] = [256, 128]");
  EXPECT_EQ(trim(keyHelp(h, "model.hidden", "MLPClassifier").second), "Widths of the hidden layers.");
  EXPECT_EQ(typeAndDefault(keyHelp(h, "data.batch_size", "FashionMNISTDataModule").first), "int = 64");
  EXPECT_EQ(typeAndDefault(keyHelp(h, "data.batch_size", "RandomDataModule").first), "int = 2");
  EXPECT_EQ(typeAndDefault(keyHelp(h, "optimizer.weight_decay", "AdamW").first), "float = 0.01");
  EXPECT_EQ(typeAndDefault(keyHelp(h, "optimizer.weight_decay", "Adam").first), "float = 0.0");
  EXPECT_EQ(typeAndDefault(keyHelp(h, "lr_scheduler.step_size", "StepLR").first), "int = 1");
  EXPECT_EQ(typeAndDefault(keyHelp(h, "trainer.callbacks.patience").first), "int = 3");
}

TEST_F(HelpTest, FitHelpListsTheLayersOfAYamlSequentialWithTheirInitArgs) {
  const RunResult r = run({"fit", "--help"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto lines = linesOf(r.out);
  const auto at = [&](const std::string& line) { return std::find(lines.begin(), lines.end(), line) - lines.begin(); };
  const auto heading =
      at("Layers of a YAML Sequential (model.init_args.layers: - {class_path: CLASS, init_args: {...}}):");
  ASSERT_LT(heading, static_cast<std::ptrdiff_t>(lines.size())) << r.out;
  const auto linear = at("  Linear  (torch.nn.Linear)");
  ASSERT_GT(linear, heading);
  EXPECT_EQ(trim(lines[static_cast<std::size_t>(linear + 2)]), "init_args.out_features     int = null");
  for (const char* layer :
       {"  Conv2d  (torch.nn.Conv2d)", "  ReLU  (torch.nn.ReLU)", "  Checkpoint", "  SelfAttention", "  Residual",
        "  RotaryEmbedding", "  Conv1D  (transformers.pytorch_utils.Conv1D)"})
    EXPECT_GT(at(layer), heading) << layer;
  EXPECT_EQ(r.out.find("torch.nn.SelfAttention"), std::string::npos) << "no torch.nn path torch does not have";
}

TEST_F(HelpTest, EverySubcommandHasTheSameKeyHelp) {
  const std::string fit = run({"fit", "--help"}).out;
  const std::string keys = fit.substr(fit.find("Config keys:"));
  for (const char* sub : {"validate", "test", "predict"}) {
    const RunResult r = run({sub, "--help"});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_NE(r.out.find("Usage: hpu-train " + std::string(sub) + " [OPTIONS]"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(keys), std::string::npos) << sub;
  }
}

// The top-level usage names every subcommand the help lists.
TEST_F(HelpTest, UsageLineNamesEverySubcommand) {
  const RunResult r = run({"--help"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::smatch usage;
  ASSERT_TRUE(std::regex_search(r.out, usage, std::regex("Usage: hpu-train \\[OPTIONS\\] \\{([a-z|]+)\\}"))) << r.out;
  const std::string listed = "|" + usage[1].str() + "|";
  const std::string subcommands = r.out.substr(r.out.find("Subcommands:"));
  std::istringstream lines(subcommands.substr(0, subcommands.find("\n\n")));
  int seen = 0;
  for (std::string line; std::getline(lines, line);) {
    std::smatch name;
    if (!std::regex_search(line, name, std::regex("^  ([a-z]+) "))) continue;
    ++seen;
    EXPECT_NE(listed.find("|" + name[1].str() + "|"), std::string::npos) << name[1] << " missing from " << listed;
  }
  EXPECT_EQ(seen, 9);
}

// trainer.strategy's help names every strategy class the registry lists
// (its "Strategies" section), ModelParallelStrategy and HPUFSDPStrategy
// among them, and every strategy name.
TEST_F(HelpTest, StrategyHelpNamesEveryRegisteredStrategy) {
  const std::string out = run({"fit", "--help"}).out;
  const std::size_t key = out.find("  --trainer.strategy ");
  ASSERT_NE(key, std::string::npos);
  const std::string entry = out.substr(key, out.find("\n  --", key + 1) - key);
  for (const char* name : {"hpu_fsdp", "hpu_fsdp_cpu_offload", "hpu_deepspeed_stage_3", "hpu_parallel"})
    EXPECT_NE(entry.find(std::string("|") + name), std::string::npos) << name << " in " << entry;
  const std::size_t section = out.find("Strategies (trainer.strategy):\n");
  ASSERT_NE(section, std::string::npos);
  std::istringstream lines(out.substr(section, out.find("\n\n", section) - section));
  std::vector<std::string> classes;
  for (std::string line; std::getline(lines, line);) {
    std::smatch cls;
    if (std::regex_search(line, cls, std::regex("^  ([A-Za-z]+)  \\("))) classes.push_back(cls[1]);
  }
  for (const char* expected : {"ModelParallelStrategy", "HPUFSDPStrategy", "HPUDeepSpeedStrategy"})
    EXPECT_NE(std::find(classes.begin(), classes.end(), expected), classes.end()) << expected;
  for (const std::string& c : classes) EXPECT_NE(entry.find(c), std::string::npos) << c << " in " << entry;
}

TEST_F(HelpTest, Version) {
  const RunResult r = run({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(std::regex_match(r.out, std::regex("hpu-train [0-9]+\\.[0-9]+\\.[0-9]+\n"))) << r.out;
}

TEST_F(HelpTest, DevicesHonoursHabanaVisibleDevices) {
  RunResult r = run({"devices"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(std::regex_search(r.out, std::regex("(^|\n)hpu:7 ")), true) << r.out;
  env()["HABANA_VISIBLE_DEVICES"] = "0,3";
  r = run({"devices"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::vector<std::string> rows;
  for (const std::string& line : linesOf(r.out))
    if (line.rfind("hpu:", 0) == 0) rows.push_back(line);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  // Renumbered from 0, keeping the physical module.
  EXPECT_TRUE(std::regex_match(rows[0], std::regex("hpu:0 +0 +gaudi2 .*"))) << rows[0];
  EXPECT_TRUE(std::regex_match(rows[1], std::regex("hpu:1 +3 +gaudi2 .*"))) << rows[1];
  EXPECT_NE(r.out.find("HABANA_VISIBLE_DEVICES=0,3"), std::string::npos) << r.out;
}

TEST_F(HelpTest, DevicesRefusesAnIdThatDoesNotExist) {
  env()["HABANA_VISIBLE_DEVICES"] = "0,9";
  const RunResult r = run({"devices"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(r.err,
            "error: HABANA_VISIBLE_DEVICES: device id 9 is out of range: the node has 8 devices "
            "(HPU_EMULATOR_DEVICES=8), ids 0-7\n");
}

}  // namespace
}  // namespace hpu::cli::testing

namespace hpu::cli::testing {
namespace {

TEST_F(HelpTest, ClassHelpPrintsThatClassesInitArgs) {
  RunResult r = run({"fit", "--model.help", "MLPClassifier"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out.rfind("MLPClassifier (Model): ", 0), 0u) << r.out;
  EXPECT_EQ(typeAndDefault(keyHelp(r.out, "model.hidden").first), "list[int] = [256, 128]");
  EXPECT_EQ(trim(keyHelp(r.out, "model.hidden").second), "Widths of the hidden layers.");
  r = run({"fit", "--data.help=lightning.pytorch.demos.boring_classes.BoringDataModule"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out,
            "lightning.pytorch.demos.boring_classes.BoringDataModule (DataModule): Lightning's BoringDataModule: "
            "RandomDataModule(size=32, length=64) in batches of 1, unshuffled.\n  (no init_args)\n");
  r = run({"fit", "--trainer.callbacks.help", "ModelCheckpoint"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out.rfind("lightning.pytorch.callbacks.ModelCheckpoint (Callback): ", 0), 0u) << r.out;
  EXPECT_EQ(typeAndDefault(keyHelp(r.out, "trainer.callbacks.save_top_k").first), "int = 1");
  r = run({"fit", "--optimizer.help", "torch.optim.AdamW"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(typeAndDefault(keyHelp(r.out, "optimizer.weight_decay").first), "float = 0.01");
  EXPECT_EQ(trim(keyHelp(r.out, "optimizer.maximize").second), "Ascend instead of descend. [default only]");
}

TEST_F(HelpTest, ClassHelpNamesWhatIsWrong) {
  RunResult r = run({"fit", "--model.help", "MLPClasifier"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "error: --model.help: unknown Model class 'MLPClasifier'; did you mean 'MLPClassifier'?\n");
  r = run({"fit", "--trainer.max_epochs.help", "X"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("error: --trainer.max_epochs.help: trainer.max_epochs takes no class (keys that do: model, ",
                        0),
            0u)
      << r.err;
  r = run({"fit", "--lr_scheduler.help"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("error: --lr_scheduler.help needs a class: --lr_scheduler.help CLASS (registered: ", 0), 0u)
      << r.err;
}

}  // namespace
}  // namespace hpu::cli::testing
