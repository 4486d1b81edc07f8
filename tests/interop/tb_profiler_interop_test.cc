// hpu-train's traces in TensorBoard's PyTorch profiler plugin
// (torch-tb-profiler in .venv/interop): a log directory holding one run of
// HPUProfiler on one device and one of PyTorchProfiler on two is served by
// `tensorboard --logdir` on a loopback port, and the plugin's own endpoints
// (tests/interop/check_tb_profiler.py) list both runs, a worker per rank,
// the overview's step breakdown of exactly the kept ProfilerSteps, every
// device op of the trace with its calls in the operator view, and the trace
// view's events. A real torch 2.13 profile of the same schedule, written
// beside, has no top-level field or event field that ours lacks. Headless
// chromium opens the plugin's page (tests/interop/tb_profiler_browser.py)
// and leaves its screenshot in this test's output directory
// (<build>/tests/interop/tb_profiler_browser/tb_profiler.png).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "interop_python.h"
#include "train_support.h"

namespace hpu::cli::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using nlohmann::json;
namespace fs = std::filesystem;

class TbProfilerInteropTest : public HpuTrainTest {
 protected:
  void SetUp() override { HPU_REQUIRE_INTEROP_PYTHON(); }

  // 8 training batches of the Fashion-MNIST MLP and 2 of validation,
  // traced into tb/<run>.
  RunResult traced(const std::string& profiler, const std::string& run_name, int devices) {
    write("traced.yaml", R"(trainer:
  max_epochs: 1
  limit_train_batches: 8
  limit_val_batches: 2
  enable_progress_bar: false
  enable_model_summary: false
  enable_checkpointing: false
  callbacks: null
data:
  init_args: {num_workers: 0}
)");
    return run({"fit", "-c", sourcePath("configs/fashion_mnist_mlp.yaml").string(), "--trainer.profiler=" + profiler,
                "-c", "traced.yaml", "--trainer.profiler.dirpath=tb/" + run_name, "--trainer.profiler.record_shapes=true",
                "--trainer.devices=" + std::to_string(devices)});
  }

  // Device ops (torch's cpu_op) of a trace file: name -> calls.
  std::map<std::string, int> deviceOps(const std::string& file) {
    std::map<std::string, int> calls;
    const json trace = json::parse(read(file));
    for (const json& e : trace["traceEvents"])
      if (e["ph"] == "X" && e["cat"] == "cpu_op") ++calls[e["name"].get<std::string>()];
    return calls;
  }
};

TEST_F(TbProfilerInteropTest, PluginShowsEveryRankItsStepsOpsAndTraceAndTorchHasNoFieldWeLack) {
  const RunResult one = traced("lightning_habana.pytorch.profiler.profiler.HPUProfiler", "one_device", 1);
  ASSERT_EQ(one.exit_code, 0) << one.describe();
  const RunResult two = traced("PyTorchProfiler", "two_devices", 2);
  ASSERT_EQ(two.exit_code, 0) << two.describe();

  const RunResult judged = interop::runPythonScript(
      "tests/interop/check_tb_profiler.py",
      {(dir() / "tb").string(), (dir() / "seen.json").string(), "--torch-trace", (dir() / "torch").string()}, dir(),
      std::chrono::seconds(300));
  std::cout << judged.out;
  ASSERT_EQ(judged.exit_code, 0) << judged.describe() << judged.out;
  const json seen = json::parse(read("seen.json"));
  EXPECT_EQ(seen["versions"]["torch-tb-profiler"], "0.4.3");
  EXPECT_EQ(seen["versions"]["tensorboard"], "2.21.0");
  EXPECT_EQ(seen["versions"]["torch"], "2.13.0+cpu");

  const json& runs = seen["runs"];
  ASSERT_EQ(runs.size(), 2u) << runs.dump();
  const std::map<std::string, std::vector<std::string>> workers = {{"one_device", {"rank0-fit"}},
                                                                  {"two_devices", {"rank0-fit", "rank1-fit"}}};
  for (const auto& [run, expected] : workers) {
    SCOPED_TRACE(run);
    ASSERT_TRUE(runs.contains(run)) << runs.dump();
    const json& r = runs[run];
    EXPECT_EQ(r["workers"], json(expected));
    EXPECT_THAT(r["step_columns"], ::testing::Contains("CPU Exec")) << "the device ops' time";
    for (const std::string& worker : expected) {
      SCOPED_TRACE(worker);
      EXPECT_EQ(r["views"][worker], json({"Overview", "Operator", "Trace"}));
      // The default schedule (wait 1, warmup 1, active 3) keeps torch's ProfilerStep#2..#4.
      EXPECT_EQ(r["steps"][worker], json({"2", "3", "4"}));
      const std::string file = "tb/" + run + "/" + worker + ".pt.trace.json";
      const std::map<std::string, int> ops = deviceOps(file);
      ASSERT_TRUE(ops.contains("linear") && ops.contains("linear_backward")) << file;
      const auto listed = r["operators"][worker].get<std::map<std::string, int>>();
      EXPECT_EQ(listed, ops);
      EXPECT_EQ(r["trace_events"][worker], json::parse(read(file))["traceEvents"].size());
    }
  }

  // torch.profiler's own file: every field it has, ours has.
  const json& torch = seen["torch"];
  const json ours = json::parse(read("tb/two_devices/rank0-fit.pt.trace.json"));
  for (const json& key : torch["top_level"]) EXPECT_TRUE(ours.contains(key.get<std::string>())) << key;
  EXPECT_EQ(ours["distributedInfo"]["world_size"], 2);
  EXPECT_EQ(ours["distributedInfo"]["rank"], 0);
  EXPECT_EQ(ours["schemaVersion"], 1);
  std::map<std::string, std::set<std::string>> fields, args;
  std::set<std::string> steps;
  for (const json& e : ours["traceEvents"]) {
    if (e["ph"] != "X") continue;
    for (const auto& [k, v] : e.items()) fields[e["cat"]].insert(k);
    for (const auto& [k, v] : e["args"].items()) args[e["cat"]].insert(k);
    if (e["name"].get<std::string>().starts_with("ProfilerStep#")) steps.insert(e["name"]);
  }
  EXPECT_EQ(json(steps), torch["step_names"]) << "the same schedule keeps the same steps";
  for (const std::string category : {"cpu_op", "user_annotation"}) {
    SCOPED_TRACE(category);
    for (const json& key : torch["events"][category]) EXPECT_TRUE(fields[category].contains(key)) << key;
    EXPECT_TRUE(args[category].contains("External id"));
  }

  // The plugin's page in a browser: the run, its views and a worker listed.
  const fs::path shots = fs::path(HPU_BINARY_DIR) / "tests/interop/tb_profiler_browser";
  const RunResult browser = interop::runPythonScript("tests/interop/tb_profiler_browser.py",
                                                     {(dir() / "tb").string(), shots.string()}, dir(),
                                                     std::chrono::seconds(180));
  std::cout << browser.out;
  ASSERT_EQ(browser.exit_code, 0) << browser.describe() << browser.out;
  const json page = json::parse(readFile(shots / "tb_profiler.json"));
  const std::string text = page["text"];
  EXPECT_THAT(text, HasSubstr("Runs\none_device"));
  EXPECT_THAT(text, HasSubstr("Views\nOverview"));
  EXPECT_THAT(text, HasSubstr("Workers\nrank0-fit"));
  EXPECT_GT(fs::file_size(shots / "tb_profiler.png"), 10'000u);
}

}  // namespace
}  // namespace hpu::cli::testing
