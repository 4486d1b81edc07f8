// Profilers through the real binary: SimpleProfiler's table (every loop
// action with its call count, top-level actions adding up to the run, one
// file per rank with `filename`), and HPUProfiler's Chrome traces (valid
// Trace Event JSON, consistent nesting, the schedule's active steps, device
// ops with shapes and dtypes, collectives on their own track, per-rank files,
// PyTorch Lightning's warning for too few steps).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "hpu_train_runner.h"

namespace hpu::cli::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// A Fashion-MNIST MLP (no dropout) with short epochs: `batches` training
// batches of 64 and 4 validation batches per epoch.
std::vector<std::string> mlpArgs(int batches, int epochs) {
  return {"-c",
          HPU_SOURCE_DIR "/configs/fashion_mnist_mlp.yaml",
          "--model.init_args.dropout=0.0",
          "--data.init_args.num_workers=0",
          "--trainer.max_epochs=" + std::to_string(epochs),
          "--trainer.limit_train_batches=" + std::to_string(batches),
          "--trainer.limit_val_batches=4",
          "--trainer.enable_progress_bar=false",
          "--trainer.enable_model_summary=false",
          "--trainer.enable_checkpointing=false",
          "--trainer.callbacks=null"};
}

struct ProfileRow {
  double mean = 0;
  std::int64_t calls = 0;
  double total = 0;
  double percent = 0;
};

// The rows of an extended SimpleProfiler report ("Total" included).
std::map<std::string, ProfileRow> parseReport(const std::string& text) {
  static const std::regex kRow(
      R"(\|\s+(\S+)\s+\|\s+([-0-9.e]+)\s+\|\s+(\d+)\s+\|\s+([0-9.]+)\s+\|\s+([0-9.]+) ?%?\s+\|)");
  std::map<std::string, ProfileRow> rows;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, kRow)) continue;
    ProfileRow r;
    r.mean = m[2] == "-" ? 0 : std::stod(m[2]);
    r.calls = std::stoll(m[3]);
    r.total = std::stod(m[4]);
    r.percent = std::stod(m[5]);
    rows[m[1]] = r;
  }
  return rows;
}

class SimpleProfilerTest : public HpuTrainTest {};

TEST_F(SimpleProfilerTest, ReportsEveryLoopActionAndTopLevelActionsAddUpToTheRun) {
  std::vector<std::string> args = mlpArgs(/*batches=*/120, /*epochs=*/2);
  args.insert(args.begin(), "fit");
  args.push_back("--trainer.profiler=simple");
  const RunResult r = run(args);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  ASSERT_NE(r.out.find("FIT Profiler Report"), std::string::npos) << r.out;
  const auto rows = parseReport(r.out);
  ASSERT_TRUE(rows.count("Total")) << r.out;

  // Calls: 2 epochs x 120 batches; validation after each epoch (4 batches)
  // and the 2-batch sanity check.
  const std::map<std::string, std::int64_t> calls = {
      {"setup", 1},           {"sanity_check", 1},    {"run_training_epoch", 2}, {"run_training_batch", 240},
      {"get_train_batch", 240}, {"training_step", 240}, {"backward", 240},         {"optimizer_step", 240},
      {"run_validation", 3},  {"validation_step", 10}, {"teardown", 1}};
  for (const auto& [action, n] : calls) {
    ASSERT_TRUE(rows.count(action)) << action << " missing from\n" << r.out;
    EXPECT_EQ(rows.at(action).calls, n) << action;
    // The table prints means to 1e-6 s and totals to 1e-5 s.
    EXPECT_NEAR(rows.at(action).mean * static_cast<double>(n), rows.at(action).total,
                5e-7 * static_cast<double>(n) + 1e-5 + 1e-6 * rows.at(action).total)
        << action;
  }
  EXPECT_EQ(rows.count("allreduce"), 0u) << "one process has no gradient reduction";

  // Everything the stage does sits inside one of these four actions.
  const double total = rows.at("Total").total;
  double top = 0;
  for (const char* a : {"setup", "sanity_check", "run_training_epoch", "teardown"}) top += rows.at(a).total;
  EXPECT_NEAR(top, total, 0.05 * total);
  // The stage is most of the process's life (start-up and exit are not in it).
  EXPECT_LE(total, r.wall.count());
  EXPECT_GE(total, 0.7 * r.wall.count());
  EXPECT_NEAR(rows.at("run_training_epoch").percent, 100.0 * rows.at("run_training_epoch").total / total, 0.01);
  // Nested actions fit inside their parents.
  EXPECT_LE(rows.at("training_step").total + rows.at("backward").total + rows.at("optimizer_step").total,
            rows.at("run_training_batch").total);
  EXPECT_LE(rows.at("run_training_batch").total + rows.at("get_train_batch").total,
            rows.at("run_training_epoch").total);
}

TEST_F(SimpleProfilerTest, FilenameWritesOneReportPerRankWithTheGradientReduction) {
  std::vector<std::string> args = mlpArgs(/*batches=*/20, /*epochs=*/1);
  args.insert(args.begin(), "fit");
  args.insert(args.end(), {"--trainer.devices=2", "--trainer.profiler=SimpleProfiler",
                           "--trainer.profiler.filename=perf", "--trainer.profiler.dirpath=prof"});
  const RunResult r = run(args);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out.find("Profiler Report"), std::string::npos) << "with a filename nothing is printed";
  for (int rank : {0, 1}) {
    const fs::path file = dir() / "prof" / ("perf-rank" + std::to_string(rank) + "-fit.txt");
    ASSERT_TRUE(fs::exists(file)) << file;
    const std::string text = read(file.string());
    const auto rows = parseReport(text);
    // limit_train_batches counts each rank's own batches: 20 steps apiece,
    // each ending in one wait for the gradient all-reduce.
    ASSERT_TRUE(rows.count("allreduce")) << text;
    EXPECT_EQ(rows.at("allreduce").calls, 20) << text;
    EXPECT_EQ(rows.at("training_step").calls, 20) << text;
    EXPECT_NE(text.find("hpu:" + std::to_string(rank) + " lazy mode:"), std::string::npos) << text;
  }
}

// ---------------------------------------------------------------- HPUProfiler

struct Trace {
  json doc;
  std::vector<json> events;  // non-metadata events
  int count(int tid, const std::string& name) const {
    return static_cast<int>(std::count_if(events.begin(), events.end(), [&](const json& e) {
      return e["tid"] == tid && e["name"] == name;
    }));
  }
};

Trace loadTrace(const fs::path& path) {
  Trace t;
  std::ifstream in(path);
  t.doc = json::parse(in);  // throws on invalid JSON
  for (const json& e : t.doc.at("traceEvents"))
    if (e.at("ph") != "M") t.events.push_back(e);
  return t;
}

// Every event has the Trace Event Format's fields; on each track, complete
// events either nest or are disjoint.
void expectWellFormed(const Trace& t, int pid) {
  std::map<int, std::vector<std::pair<double, double>>> tracks;
  for (const json& e : t.events) {
    ASSERT_TRUE(e.contains("name") && e["name"].is_string()) << e;
    ASSERT_TRUE(e.contains("ph") && e.contains("ts") && e.contains("tid") && e.contains("cat")) << e;
    EXPECT_EQ(e["pid"], pid) << e;
    if (e["ph"] == "X") {
      ASSERT_TRUE(e.contains("dur")) << e;
      EXPECT_GE(e["dur"].get<double>(), 0.0) << e;
      tracks[e["tid"].get<int>()].push_back({e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
    }
  }
  for (auto& [tid, spans] : tracks) {
    std::sort(spans.begin(), spans.end(), [](auto& a, auto& b) { return a.first < b.first || (a.first == b.first && a.second > b.second); });
    std::vector<double> open;  // ends of the enclosing events
    for (const auto& [begin, end] : spans) {
      while (!open.empty() && open.back() <= begin) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(end, open.back() + 0.002) << "track " << tid << ": [" << begin << ", " << end << "] overlaps its parent";
      }
      open.push_back(end);
    }
  }
}

class HPUProfilerTest : public HpuTrainTest {
 protected:
  RunResult fitTraced(int batches, std::vector<std::string> extra) {
    std::vector<std::string> args = mlpArgs(batches, 1);
    args.insert(args.begin(), "fit");
    args.insert(args.end(), {"--trainer.profiler=lightning_habana.pytorch.profiler.profiler.HPUProfiler",
                             "--trainer.profiler.dirpath=traces", "--trainer.profiler.filename=run"});
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  }
  fs::path tracePath(int rank) const { return dir() / "traces" / ("run-rank" + std::to_string(rank) + "-fit.pt.trace.json"); }
};

TEST_F(HPUProfilerTest, TraceIsValidNestedAndKeepsTheActiveSteps) {
  const RunResult r = fitTraced(10, {"--trainer.profiler.record_shapes=true"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  ASSERT_TRUE(fs::exists(tracePath(0))) << r.describe();
  const Trace t = loadTrace(tracePath(0));
  expectWellFormed(t, 0);

  // The default schedule (wait 1, warmup 1, active 3, repeat 1) keeps
  // training steps 2..4, each with its backward and optimizer step.
  EXPECT_EQ(t.count(0, "training_step"), 3);
  EXPECT_EQ(t.count(0, "backward"), 3);
  EXPECT_EQ(t.count(0, "optimizer_step"), 3);
  EXPECT_EQ(t.count(0, "run_training_epoch"), 1) << "the epoch encloses the kept steps";
  // Per step: h2d, then linear/relu x3 and the loss forward, their backward.
  EXPECT_EQ(t.count(1, "linear"), 3 * 3 + 3 * 3) << "3 training and 3 validation steps of 3 layers";
  EXPECT_EQ(t.count(1, "linear_backward"), 9);
  EXPECT_EQ(t.count(1, "cross_entropy_backward"), 3);
  EXPECT_EQ(t.count(2, "allreduce"), 0) << "one process runs no collective";

  const auto linear = std::find_if(t.events.begin(), t.events.end(), [](const json& e) { return e["name"] == "linear"; });
  ASSERT_NE(linear, t.events.end());
  EXPECT_EQ((*linear)["args"]["Input Dims"], json::parse("[[64,784],[256,784],[256]]")) << *linear;
  EXPECT_EQ((*linear)["args"]["Input type"], json::parse(R"(["float32","float32","float32"])")) << *linear;
  EXPECT_EQ((*linear)["cat"], "cpu_op") << "torch's category of an operator";

  // Device ops run inside the host actions that issue them.
  std::vector<std::pair<double, double>> host;
  for (const json& e : t.events)
    if (e["tid"] == 0) host.push_back({e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
  for (const json& e : t.events) {
    if (e["tid"] != 1 || e["ph"] != "X") continue;
    const double b = e["ts"], end = b + e["dur"].get<double>();
    EXPECT_TRUE(std::any_of(host.begin(), host.end(), [&](auto& h) { return h.first <= b && end <= h.second + 0.002; }))
        << e;
  }

  // Tracks are named, and the lazy-mode statistics ride along.
  std::map<int, std::string> names;
  for (const json& e : t.doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") names[e["tid"].get<int>()] = e["args"]["name"];
  EXPECT_EQ(names[0], "host: training loop");
  EXPECT_EQ(names[1], "hpu:0 (emulated device)");
  EXPECT_EQ(names[2], "collectives");
  const json& lazy = t.doc["otherData"]["lazy_mode"];
  EXPECT_EQ(lazy["mode"], "lazy");
  // Backward runs outside the lazy graph; a training step's graph ends with
  // the optimizer's update, which validation's lacks: two graphs.
  EXPECT_EQ(lazy["compilations"].get<int>(), 2);
  EXPECT_EQ(lazy["steps"].get<int>(), 10 + 2 + 4) << "training, sanity-check and validation steps";
  EXPECT_EQ(t.doc["otherData"]["schedule"], "skip_first=0, wait=1, warmup=1, active=3, repeat=1");
}

TEST_F(HPUProfilerTest, ScheduleSelectsTheRecordedSteps) {
  // skip 1, then 2 cycles of 2 active steps: steps 1..4.
  const RunResult r = fitTraced(10, {"--trainer.profiler.schedule={skip_first: 1, wait: 0, warmup: 0, active: 2, repeat: 2}",
                                     "--trainer.limit_val_batches=0"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const Trace t = loadTrace(tracePath(0));
  expectWellFormed(t, 0);
  EXPECT_EQ(t.count(0, "training_step"), 4);
  EXPECT_EQ(t.count(0, "run_training_batch"), 4);
  EXPECT_EQ(t.count(0, "get_train_batch"), 4) << "each kept step's batch fetch (steps 1..4)";
  EXPECT_EQ(r.err.find("not enough steps"), std::string::npos) << r.err;
}

TEST_F(HPUProfilerTest, TooFewStepsKeepEveryStepWithLightningsWarning) {
  const RunResult r = fitTraced(2, {"--trainer.limit_val_batches=0"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("The PyTorch Profiler default schedule will be overridden as there is not enough steps to "
                       "properly record traces."),
            std::string::npos)
      << r.err;
  const Trace t = loadTrace(tracePath(0));
  expectWellFormed(t, 0);
  EXPECT_EQ(t.count(0, "training_step"), 2);
  EXPECT_EQ(t.count(0, "setup"), 1);
}

TEST_F(HPUProfilerTest, EveryRankWritesItsTraceWithItsCollectives) {
  const RunResult r = fitTraced(8, {"--trainer.devices=2", "--trainer.limit_val_batches=0"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (int rank : {0, 1}) {
    ASSERT_TRUE(fs::exists(tracePath(rank))) << r.describe();
    const Trace t = loadTrace(tracePath(rank));
    expectWellFormed(t, rank);
    EXPECT_EQ(t.count(0, "allreduce"), 3) << "the host waits for each kept step's gradient reduction";
    // The MLP's 235146 gradients fit one 25 MiB bucket: one allreduce a step.
    EXPECT_EQ(t.count(2, "allreduce"), 3);
    for (const json& e : t.events) {
      if (e["tid"] != 2) continue;
      EXPECT_EQ(e["cat"], "user_annotation") << "torch's category of a collective's range";
      if (e["name"] != "allreduce") continue;  // metric reductions and barriers too
      EXPECT_EQ(e["args"]["dtype"], "float32");
      EXPECT_EQ(e["args"]["count"], 235146);
      EXPECT_EQ(e["args"]["bytes"], 4 * 235146);
      EXPECT_EQ(e["args"]["async"], true) << "bucket allreduces overlap the backward pass";
    }
    std::string process;
    for (const json& e : t.doc["traceEvents"])
      if (e["name"] == "process_name") process = e["args"]["name"];
    EXPECT_EQ(process, "rank " + std::to_string(rank));
  }
}

TEST_F(HPUProfilerTest, CustomActionsOfTheModelAppearInBothProfilers) {
  // examples/custom_model.cc profiles its loss as "residual_mlp_loss".
  RunOptions o;
  o.cwd = dir();
  o.env = env();
  const std::vector<std::string> common = {"fit",
                                           "--config",
                                           HPU_SOURCE_DIR "/examples/custom_model.yaml",
                                           "--trainer.max_epochs=1",
                                           "--trainer.limit_train_batches=6",
                                           "--trainer.limit_val_batches=0",
                                           "--trainer.enable_progress_bar=false",
                                           "--trainer.enable_checkpointing=false"};
  std::vector<std::string> simple = common;
  simple.push_back("--trainer.profiler=simple");
  const RunResult s = runProgram(HPU_TRAIN_CUSTOM_BIN, simple, o);
  ASSERT_EQ(s.exit_code, 0) << s.describe();
  const auto rows = parseReport(s.out);
  ASSERT_TRUE(rows.count("residual_mlp_loss")) << s.out;
  EXPECT_EQ(rows.at("residual_mlp_loss").calls, 6);

  std::vector<std::string> traced = common;
  traced.insert(traced.end(), {"--trainer.profiler=HPUProfiler", "--trainer.profiler.dirpath=traces",
                               "--trainer.profiler.filename=run", "--trainer.default_root_dir=second"});
  const RunResult h = runProgram(HPU_TRAIN_CUSTOM_BIN, traced, o);
  ASSERT_EQ(h.exit_code, 0) << h.describe();
  const Trace t = loadTrace(tracePath(0));
  EXPECT_EQ(t.count(0, "residual_mlp_loss"), 3);
}

}  // namespace
}  // namespace hpu::cli::testing
