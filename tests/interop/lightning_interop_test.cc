// Lightning 2.4 as the judge of hpu-train's config surface, and LightningCLI
// as a peer that reads and writes our configs (check_lightning.py in
// .venv/interop, with lightning 2.4.0, jsonargparse and torch 2.13.0 CPU;
// lightning-habana's classes are stand-ins with its 1.6.0 signatures,
// lightning_habana_standin.py).
//  - Every init_arg jsonargparse derives from the installed Trainer and from
//    every class hpu-train registers under lightning, torch or
//    lightning_habana is a key of ours, with Lightning's default, either
//    supported or taking that default only (ParamSpec::only_default_because);
//    every key of ours that is not marked `own` is Lightning's.
//  - LightningCLI's --print_config for a LightningModule and a DataModule
//    written in Python with the init_args of our MLPClassifier and
//    CSVDataModule (their class paths __main__.MLPClassifier, ...) runs in
//    hpu-train as it is.
//  - hpu-train's --print_config for Lightning's own classes (Trainer,
//    callbacks, loggers, profiler, strategy, plugins, optimizer, scheduler)
//    is read by LightningCLI, whose --print_config prints it back unchanged.
// Outside CI a machine without .venv/interop skips; in CI (CI=true) its
// absence fails. Layers of our YAML Sequential (torch.nn.Linear, ...) are not
// judged: LightningCLI never parses them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "interop_python.h"
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "hpu_train_runner.h"
#include "schema_dump.h"

namespace hpu::cli::testing {
namespace {

using ::testing::IsEmpty;
using nlohmann::json;
namespace fs = std::filesystem;

const fs::path kPython = interop::python();

// Defaults Lightning holds as objects, which a YAML config spells as ours do:
// (class name, key) -> our default.
const std::map<std::pair<std::string, std::string>, std::string> kSpelledAsData = {
    // a function: jsonargparse prints its import path
    {{"BackboneFinetuning", "lambda_func"}, "lightning.pytorch.callbacks.finetuning.multiplicative"},
    // torch.device("cpu")
    {{"StochasticWeightAveraging", "device"}, "cpu"},
};

// Plain defaults that differ, each for a reason.
const std::map<std::pair<std::string, std::string>, std::string> kDefaultDiffers = {
    // Lightning's module ranges ([pl][module]...) are not recorded: false is
    // what hpu-train does, and true is refused with that reason.
    {{"PyTorchProfiler", "record_module_names"}, "false"},
    // Lightning saves and requeues on SLURM's signal; hpu-train does not, and
    // refuses true with that reason.
    {{"SLURMEnvironment", "auto_requeue"}, "false"},
};

// LightningCLI passes these itself (add_optimizer_args / add_lr_scheduler_args skip them).
const std::set<std::string> kInjected = {"params", "optimizer"};

class LightningInteropTest : public HpuTrainTest {
 protected:
  void SetUp() override {
    HPU_REQUIRE_INTEROP_PYTHON();
  }

  // check_lightning.py with `args`; expects exit 0.
  RunResult judge(const std::vector<std::string>& args) {
    std::vector<std::string> all{sourcePath("tests/interop/check_lightning.py").string()};
    all.insert(all.end(), args.begin(), args.end());
    RunOptions o;
    o.cwd = dir();
    o.env = {{"PATH", "/usr/bin:/bin"}, {"HOME", dir().string()}, {"OMP_NUM_THREADS", "1"}};
    o.timeout = std::chrono::seconds(300);
    RunResult r = runProgram(kPython, all, o);
    EXPECT_EQ(r.exit_code, 0) << r.describe() << r.out;
    return r;
  }
};

// What Lightning's `theirs` params say about `ours`: one line per problem.
std::vector<std::string> compare(const std::string& cls, const json& ours, const json& theirs) {
  std::map<std::string, json> mine;
  for (const json& p : ours) mine[p["name"]] = p;
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const json& p : theirs) {
    const std::string key = p["name"];
    if (kInjected.contains(key)) continue;
    seen.insert(key);
    const std::string where = cls + "." + key + " (Lightning: " + p["type"].get<std::string>() + " = " +
                              p["default"].dump() + ")";
    auto it = mine.find(key);
    if (it == mine.end()) {
      out.push_back(where + ": unknown key");
      continue;
    }
    const json& q = it->second;
    const json& d = p["default"];
    if (d.is_object() && d.contains("required")) continue;  // any value we default to extends it
    if (d.is_object() && d.contains("repr")) {
      auto spelled = kSpelledAsData.find({cls, key});
      if (spelled == kSpelledAsData.end() || spelled->second != q["default_yaml"])
        out.push_back(where + ": default is an object; ours is " + q["default_yaml"].get<std::string>());
      continue;
    }
    if (d != q["default"] && !kDefaultDiffers.contains({cls, key}))
      out.push_back(where + ": our default is " + q["default"].dump());
  }
  for (const auto& [key, q] : mine)
    if (!seen.contains(key) && !q["own"].get<bool>() && !kInjected.contains(key))
      out.push_back(cls + "." + key + ": ours, not Lightning's, and not marked own");
  return out;
}

TEST_F(LightningInteropTest, EveryLightningKeyIsSupportedWithItsDefaultOrRefusedWithAReason) {
  const json ours = core::config::schemaDump();
  write("ours.json", ours.dump());
  judge({"signatures", (dir() / "ours.json").string(), (dir() / "theirs.json").string()});
  const json theirs = json::parse(read("theirs.json"));
  EXPECT_EQ(theirs["lightning"], "2.4.0");
  EXPECT_EQ(theirs["torch"], "2.13.0+cpu");

  std::vector<std::string> findings = compare("Trainer", ours["trainer"], theirs["trainer"]);
  ASSERT_EQ(theirs["trainer"].size(), 39u);  // Lightning 2.4's Trainer
  std::size_t judged = 0;
  for (const json& c : ours["components"]) {
    if (c["kind"] == "Layer" || !theirs["classes"].contains(c["class_path"])) continue;
    const json& t = theirs["classes"][c["class_path"].get<std::string>()];
    if (t.contains("error")) {
      findings.push_back(c["class_path"].get<std::string>() + ": " + t["error"].get<std::string>());
      continue;
    }
    ++judged;
    for (std::string& f : compare(c["name"], c["init_args"], t["params"])) findings.push_back(std::move(f));
  }
  // Every Lightning, torch and lightning-habana class we register, none skipped.
  EXPECT_GE(judged, 50u);
  for (const json& skipped : theirs["skipped"]) {
    const std::string path = skipped;
    EXPECT_TRUE(path.find('.') == std::string::npos || path.starts_with("transformers.") ||
                path.starts_with("pl_bolts.") || path.starts_with("deepspeed."))
        << path;
  }
  std::string all;
  for (const std::string& f : findings) all += "\n  " + f;
  EXPECT_THAT(findings, IsEmpty()) << findings.size() << " findings:" << all;
}

// Differences between two YAML documents, class paths of model: and data:
// compared by their last component (LightningCLI prints the classes of its
// script as __main__.MLPClassifier, hpu-train as MLPClassifier); numbers
// compared as numbers.
void yamlDiff(const YAML::Node& a, const YAML::Node& b, const std::string& path, std::vector<std::string>& out) {
  if (a.IsMap() && b.IsMap()) {
    std::set<std::string> keys;
    for (const auto& kv : a) keys.insert(kv.first.Scalar());
    for (const auto& kv : b) keys.insert(kv.first.Scalar());
    for (const std::string& k : keys) {
      if (!a[k]) out.push_back(path + "." + k + ": only LightningCLI's");
      else if (!b[k]) out.push_back(path + "." + k + ": only ours");
      else yamlDiff(a[k], b[k], path + "." + k, out);
    }
    return;
  }
  if (a.IsSequence() && b.IsSequence() && a.size() == b.size()) {
    for (std::size_t i = 0; i < a.size(); ++i) yamlDiff(a[i], b[i], path + "[" + std::to_string(i) + "]", out);
    return;
  }
  if (a.IsNull() && b.IsNull()) return;
  if (a.IsScalar() && b.IsScalar()) {
    std::string x = a.Scalar(), y = b.Scalar();
    if (path == ".model.class_path" || path == ".data.class_path") {
      x = x.substr(x.rfind('.') + 1);
      y = y.substr(y.rfind('.') + 1);
    }
    if (x == y) return;
    char *end_x = nullptr, *end_y = nullptr;
    const double dx = std::strtod(x.c_str(), &end_x), dy = std::strtod(y.c_str(), &end_y);
    if (!x.empty() && !y.empty() && *end_x == '\0' && *end_y == '\0' && dx == dy) return;
  }
  out.push_back(path + ": ours " + YAML::Dump(a) + ", LightningCLI's " + YAML::Dump(b));
}

// 16 rows of two features and a binary label.
std::string csvRows() {
  std::string csv = "x0,x1,label\n";
  for (int i = 0; i < 16; ++i) csv += std::to_string(i) + "," + std::to_string(2 * i % 5) + "," + std::to_string(i % 2) + "\n";
  return csv;
}

TEST_F(LightningInteropTest, LightningCliConfigOfAMirrorOfOurClassesRunsAsIs) {
  write("train.csv", csvRows());
  write("base.yaml",
        "trainer:\n  devices: 1\n  max_epochs: 2\n"
        "model:\n  class_path: MLPClassifier\n  init_args: {hidden: [8], dropout: 0.0}\n"
        "data:\n  class_path: CSVDataModule\n  init_args: {train_file: train.csv, batch_size: 4}\n");
  judge({"print_mirror", "printed.yaml", "--config", "base.yaml"});
  const std::string printed = read("printed.yaml");
  ASSERT_THAT(printed, ::testing::HasSubstr("class_path: __main__.MLPClassifier")) << printed;
  ASSERT_THAT(printed, ::testing::HasSubstr("class_path: __main__.CSVDataModule")) << printed;
  const RunResult r = run({"fit", "-c", "printed.yaml", "--trainer.enable_progress_bar=false"});
  ASSERT_EQ(r.exit_code, 0) << r.describe() << printed;
  // Steps ran: the last epoch's checkpoint (epoch=1-step=N, N > 0).
  std::vector<std::string> checkpoints;
  const fs::path ckpts = dir() / "lightning_logs/version_0/checkpoints";
  if (fs::exists(ckpts))
    for (const auto& e : fs::directory_iterator(ckpts)) checkpoints.push_back(e.path().filename().string());
  ASSERT_EQ(checkpoints.size(), 1u) << r.describe();
  EXPECT_THAT(checkpoints[0], ::testing::MatchesRegex("epoch=1-step=[1-9][0-9]*\\.ckpt"));
}

TEST_F(LightningInteropTest, OurPrintConfigOfLightningsClassesIsReadAndReprintedByLightningCli) {
  write("train.csv", csvRows());
  write("lightning.yaml", R"(seed_everything: 7
trainer:
  devices: 1
  max_epochs: 1
  strategy: lightning_habana.HPUParallelStrategy
  callbacks:
  - class_path: lightning.pytorch.callbacks.ModelCheckpoint
    init_args: {monitor: val_loss, save_top_k: 2}
  - class_path: lightning.pytorch.callbacks.EarlyStopping
    init_args: {monitor: val_loss, patience: 3}
  - lightning.pytorch.callbacks.LearningRateMonitor
  - lightning.pytorch.callbacks.RichProgressBar
  - class_path: lightning.pytorch.callbacks.StochasticWeightAveraging
    init_args: {swa_lrs: 0.01}
  logger:
    class_path: lightning.pytorch.loggers.TensorBoardLogger
    init_args: {save_dir: logs}
  profiler: lightning.pytorch.profilers.PyTorchProfiler
  plugins:
  - class_path: lightning_habana.HPUPrecisionPlugin
    init_args: {precision: bf16-mixed}
model:
  class_path: MLPClassifier
  init_args: {hidden: [8]}
data:
  class_path: CSVDataModule
  init_args: {train_file: train.csv, batch_size: 4}
optimizer:
  class_path: torch.optim.Adam
  init_args: {lr: 0.01}
lr_scheduler:
  class_path: torch.optim.lr_scheduler.StepLR
  init_args: {step_size: 1}
)");
  const RunResult printed = run({"fit", "-c", "lightning.yaml", "--print_config"});
  ASSERT_EQ(printed.exit_code, 0) << printed.describe();
  write("ours.yaml", printed.out);
  judge({"reprint", "ours.yaml", "theirs.yaml"});
  std::vector<std::string> diffs;
  yamlDiff(YAML::Load(printed.out), YAML::LoadFile((dir() / "theirs.yaml").string()), "", diffs);
  EXPECT_THAT(diffs, IsEmpty()) << printed.out;
  // LightningCLI's reprint of its own print is the same again.
  judge({"reprint", "theirs.yaml", "again.yaml"});
  EXPECT_EQ(read("again.yaml"), read("theirs.yaml"));
}

}  // namespace
}  // namespace hpu::cli::testing
