// hpu-train's logs read by the real tools (tests/interop/check_loggers.py in
// .venv/interop): TensorBoard's Python reader (EventAccumulator) and the
// `tensorboard` program, asked over HTTP what its dashboards show with its
// Python and its Rust reader, load every scalar at its step with the value
// metrics.csv has, each step once, the hparams and the config, also for a
// run continued after an elastic restart; our protos number their fields as
// TensorBoard's do. mlflow's MlflowClient lists our file store's
// experiments, runs, params, tags, metric histories with their steps (those
// of metrics.csv), artifacts and each run's status and times, for one and
// two devices, an elastic restart and a failed run.
// Outside CI a machine without .venv/interop skips; in CI (CI=true) its
// absence fails.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "interop_python.h"
#include "train_support.h"

namespace hpu::cli::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using nlohmann::json;
namespace fs = std::filesystem;

const fs::path kPython = interop::python();

// A metric's points: (step, value), in the order read.
using Points = std::vector<std::pair<std::int64_t, double>>;

// An MLP on 80 rows of a fixed pseudo-random CSV (64 to train in batches of
// 4, 16 to validate): 16 steps an epoch, 2 epochs, every step logged, a
// checkpoint every 10 steps.
constexpr const char* kConfig = R"(seed_everything: 42
trainer:
  devices: 1
  max_epochs: 2
  log_every_n_steps: 1
  enable_progress_bar: false
  enable_model_summary: false
  callbacks:
    - {class_path: ModelCheckpoint, init_args: {every_n_train_steps: 10, save_last: true}}
model:
  class_path: MLPClassifier
  init_args: {hidden: [8], dropout: 0.1, activation: tanh, lr: 0.01}
data:
  class_path: CSVDataModule
  init_args: {train_file: data.csv, batch_size: 4, val_split: 0.2}
)";

class LoggerInteropTest : public HpuTrainTest {
 protected:
  void SetUp() override {
    HPU_REQUIRE_INTEROP_PYTHON();
    std::ostringstream csv;
    csv << "f0,f1,f2,f3,label\n";
    for (int i = 0; i < 80; ++i) {
      double x[4];
      for (int j = 0; j < 4; ++j) x[j] = std::round(std::sin(i * (j + 1) * 0.7 + j) * 1e4) / 1e4;
      csv << x[0] << "," << x[1] << "," << x[2] << "," << x[3] << ","
          << (x[0] + x[1] > 0) + (x[2] > 0.5) << "\n";
    }
    write("data.csv", csv.str());
    write("mlp.yaml", kConfig);
    env()["HPU_RESTART_BACKOFF"] = "10ms";
  }

  RunResult fit(const std::vector<std::string>& args) {
    std::vector<std::string> all{"fit", "-c", "mlp.yaml"};
    all.insert(all.end(), args.begin(), args.end());
    return run(all);
  }

  // What check_loggers.py read for `c` (a case: protos, tensorboard_logdir, mlflow_store).
  json judge(const json& c) {
    write("case.json", c.dump());
    RunOptions o;
    o.cwd = dir();
    o.env = {{"PATH", "/usr/bin:/bin"}, {"HOME", dir().string()}, {"OMP_NUM_THREADS", "1"}};
    o.timeout = std::chrono::seconds(600);
    const RunResult r = runProgram(
        kPython, {sourcePath("tests/interop/check_loggers.py").string(), (dir() / "case.json").string(),
                  (dir() / "read.json").string()},
        o);
    EXPECT_EQ(r.exit_code, 0) << r.describe() << r.out;
    std::cout << r.out;
    return fs::exists(dir() / "read.json") ? json::parse(read("read.json")) : json::object();
  }

  // Every metric of metrics.csv in `version` as (step, value), in row order;
  // with `once`, a value logged again at the same step (epoch, beside the
  // training and the validation metrics) once.
  std::map<std::string, Points> csvMetrics(const std::string& version, bool once) const {
    const CsvTable m = readCsv(dir() / "lightning_logs" / version / "metrics.csv");
    const std::vector<std::string> steps = m.column("step");
    std::map<std::string, Points> out;
    for (std::size_t col = 0; col < m.header.size(); ++col) {
      if (m.header[col] == "step") continue;
      Points& points = out[m.header[col]];
      for (std::size_t row = 0; row < m.rows.size(); ++row) {
        if (m.rows[row][col].empty()) continue;
        const std::pair<std::int64_t, double> p{std::stoll(steps[row]), std::stod(m.rows[row][col])};
        if (!once || points.empty() || points.back() != p) points.push_back(p);
      }
    }
    return out;
  }
};

Points points(const json& list) {
  Points out;
  for (const json& p : list) out.emplace_back(p[0].get<std::int64_t>(), p[1].get<double>());
  return out;
}

std::vector<std::int64_t> stepsOf(const Points& p) {
  std::vector<std::int64_t> out;
  for (const auto& [step, value] : p) out.push_back(step);
  return out;
}

std::vector<std::int64_t> range(std::int64_t from, std::int64_t to) {
  std::vector<std::int64_t> out;
  for (std::int64_t s = from; s < to; ++s) out.push_back(s);
  return out;
}

// TensorBoard holds float32: each value of metrics.csv rounded once.
Points asFloat32(Points p) {
  for (auto& [step, value] : p) value = static_cast<float>(value);
  return p;
}

TEST_F(LoggerInteropTest, TensorBoardShowsEveryScalarOnceAtItsStepTheHparamsAndTheConfigAlsoAfterARestart) {
  const RunResult plain = fit({});
  ASSERT_EQ(plain.exit_code, 0) << plain.describe();
  // Round 0 dies at step 29, after the checkpoint of step 20 and after its
  // event file took records of steps 20..; round 1 continues version_1 from step 20.
  env()["HPU_FAULT"] = "crash,rank=0,step=29,restart=0";
  env()["HPU_LOG_LEVEL"] = "info";  // the resumed step
  const RunResult restarted = fit({"--trainer.max_restarts=1"});
  ASSERT_EQ(restarted.exit_code, 0) << restarted.describe();
  ASSERT_THAT(restarted.err, HasSubstr("was killed by signal 9"));
  ASSERT_THAT(restarted.err, HasSubstr("global step 20"));
  const std::map<std::string, Points> csv = csvMetrics("version_0", /*once=*/true);
  ASSERT_EQ(csvMetrics("version_1", /*once=*/true), csv);  // a restart ends with the uninterrupted metrics
  ASSERT_EQ(stepsOf(csv.at("train_loss")), range(0, 32));
  ASSERT_EQ(stepsOf(csv.at("val_loss")), (std::vector<std::int64_t>{15, 31}));

  const RunResult protoc = runProgram(
      "/usr/bin/protoc",
      {"-I", sourcePath("core/loggers/proto").string(), "--include_imports",
       "--descriptor_set_out=" + (dir() / "protos.pb").string(), "tensorboard/event.proto", "tensorboard/hparams.proto"},
      {.cwd = dir(), .env = {}});
  ASSERT_EQ(protoc.exit_code, 0) << protoc.describe();
  const json seen = judge({{"protos", (dir() / "protos.pb").string()},
                           {"tensorboard_logdir", (dir() / "lightning_logs").string()}});
  ASSERT_TRUE(seen.contains("tensorboard")) << seen.dump();

  // The files as written: each round's file opens with SessionLog START (at 0,
  // then at the resumed step 20); the first round's file holds values of
  // steps 20.. that the restart redid, and the second none below step 20.
  const json& files = seen["tensorboard"]["files"];
  ASSERT_EQ(files["version_0"].size(), 1u);
  ASSERT_EQ(files["version_1"].size(), 2u);
  for (const json& file : {files["version_0"][0], files["version_1"][0]}) {
    EXPECT_EQ(file[1][0], json({0, "file_version"}));
    EXPECT_EQ(file[1][1], json({0, "session_log:START"}));
  }
  const json& first = files["version_1"][0][1];
  const json& second = files["version_1"][1][1];
  EXPECT_TRUE(std::any_of(first.begin(), first.end(),
                          [](const json& r) { return r[0] >= 20 && r[1] == "summary:train_loss"; }))
      << first.dump();
  EXPECT_EQ(second[1], json({20, "session_log:START"}));
  for (std::size_t i = 1; i < second.size(); ++i) EXPECT_GE(second[i][0].get<int>(), 20) << second[i].dump();
  EXPECT_LT(files["version_1"][0][0].get<std::string>(), files["version_1"][1][0].get<std::string>());

  // What each reader shows: the scalars of metrics.csv (and hp_metric = -1
  // at step 0), each step once, in both runs alike; one config text; the hparams.
  std::map<std::string, Points> expected;
  for (const auto& [tag, p] : csv) expected[tag] = asFloat32(p);
  expected["hp_metric"] = {{0, -1.0}};
  const json& readers = seen["tensorboard"]["readers"];
  std::vector<std::string> names;
  for (const auto& [reader, runs] : readers.items()) names.push_back(reader);
  EXPECT_THAT(names, ElementsAre("EventAccumulator", "tensorboard --load_fast=false", "tensorboard --load_fast=true"));
  for (const auto& [reader, runs] : readers.items()) {
    for (const std::string run : {"version_0", "version_1"}) {
      SCOPED_TRACE(reader + ", " + run);
      ASSERT_TRUE(runs.contains(run)) << runs.dump();
      const json& r = runs[run];
      std::map<std::string, Points> scalars;
      for (const auto& [tag, list] : r["scalars"].items()) scalars[tag] = asFloat32(points(list));
      EXPECT_EQ(scalars, expected);
      EXPECT_EQ(stepsOf(scalars["epoch"]), range(0, 32));
      EXPECT_EQ(stepsOf(scalars["val_acc"]), (std::vector<std::int64_t>{15, 31}));
      for (const auto& [step, acc] : scalars["val_acc"]) EXPECT_EQ(acc * 16, std::round(acc * 16));  // of 16 rows

      ASSERT_EQ(r["text"].size(), 1u) << r["text"].dump();
      const json& text = r["text"]["config/text_summary"];
      ASSERT_EQ(text.size(), 1u) << text.dump();
      EXPECT_EQ(text[0][0], 0);
      EXPECT_THAT(text[0][1].get<std::string>(), HasSubstr("seed_everything: 42"));
      if (reader == "EventAccumulator") {
        EXPECT_TRUE(text[0][1].get<std::string>().starts_with("```yaml\nseed_everything: 42\n")) << text[0][1];
      }

      EXPECT_EQ(r["hparams"], json({{"hidden", "[8]"},
                                    {"dropout", 0.1},
                                    {"activation", "tanh"},
                                    {"lr", 0.01},
                                    {"label_smoothing", 0.0}}));
      EXPECT_EQ(r["hparam_types"], json({{"hidden", "DATA_TYPE_STRING"},
                                         {"dropout", "DATA_TYPE_FLOAT64"},
                                         {"activation", "DATA_TYPE_STRING"},
                                         {"lr", "DATA_TYPE_FLOAT64"},
                                         {"label_smoothing", "DATA_TYPE_FLOAT64"}}));
      EXPECT_EQ(r["metrics"], json({"hp_metric"}));
      EXPECT_EQ(r["status"], "STATUS_SUCCESS");
    }
  }
  EXPECT_EQ(seen["versions"]["tensorboard"], "2.21.0");
}

TEST_F(LoggerInteropTest, MlflowListsExperimentsRunsParamsMetricHistoriesAndStatusOfOurFileStore) {
  const auto loggers = [&](const std::string& experiment, const std::string& run_name) {
    const std::string name = "loggers_" + run_name + ".yaml";
    write(name, "trainer:\n  logger:\n    - class_path: MLFlowLogger\n      init_args: {experiment_name: " + experiment +
                    ", run_name: " + run_name + ", tags: {team: hpu}}\n    - CSVLogger\n");
    return name;
  };
  // One run per lightning_logs/version_N (its CSVLogger's), in this order.
  const RunResult one = fit({"-c", loggers("exp", "one-device")});
  ASSERT_EQ(one.exit_code, 0) << one.describe();
  const RunResult two = fit({"-c", loggers("exp", "two-devices"), "--trainer.devices=2"});
  ASSERT_EQ(two.exit_code, 0) << two.describe();
  env()["HPU_FAULT"] = "crash,rank=1,step=14,restart=0";  // of 16 steps, after the checkpoint of step 10
  const RunResult restarted =
      fit({"-c", loggers("elastic", "restarted"), "--trainer.devices=2", "--trainer.max_restarts=1"});
  ASSERT_EQ(restarted.exit_code, 0) << restarted.describe();
  ASSERT_THAT(restarted.err, HasSubstr("was killed by signal 9"));
  env().erase("HPU_FAULT");
  const RunResult failed = fit({"-c", loggers("failing", "failed"), "--trainer.callbacks+=EarlyStopping",
                                "--trainer.callbacks.monitor=missing_metric"});
  ASSERT_NE(failed.exit_code, 0) << failed.describe();

  const json seen = judge({{"mlflow_store", (dir() / "mlruns").string()}});
  ASSERT_TRUE(seen.contains("mlflow")) << seen.dump();
  EXPECT_EQ(seen["versions"]["mlflow"], "3.17.2");
  std::map<std::string, json> experiments;
  for (const json& e : seen["mlflow"]) {
    EXPECT_EQ(e["lifecycle_stage"], "active");
    experiments[e["name"].get<std::string>()] = e;
  }
  ASSERT_THAT(experiments, ::testing::SizeIs(4));
  EXPECT_EQ(experiments["Default"]["experiment_id"], "0");
  EXPECT_EQ(experiments["Default"]["runs"].size(), 0u);
  EXPECT_EQ(experiments["exp"]["artifact_location"],
            "file://" + (fs::canonical(dir()) / "mlruns" / experiments["exp"]["experiment_id"].get<std::string>()).string());

  std::map<std::string, json> runs;
  for (const std::string e : {"exp", "elastic", "failing"})
    for (const json& r : experiments[e]["runs"]) runs[r["run_name"].get<std::string>()] = r;
  ASSERT_THAT(runs, ::testing::SizeIs(4));
  const std::map<std::string, std::string> version{
      {"one-device", "version_0"}, {"two-devices", "version_1"}, {"restarted", "version_2"}};
  for (const auto& [name, r] : runs) {
    SCOPED_TRACE(name);
    EXPECT_EQ(r["status"], name == "failed" ? "FAILED" : "FINISHED");
    EXPECT_EQ(r["lifecycle_stage"], "active");
    // The start is global rank 0's, whichever rank ends last.
    EXPECT_GT(r["start_time"].get<std::int64_t>(), 1'600'000'000'000);
    EXPECT_GE(r["end_time"].get<std::int64_t>(), r["start_time"].get<std::int64_t>());
    EXPECT_EQ(r["params"], json({{"hidden", "[8]"},
                                 {"dropout", "0.1"},
                                 {"activation", "tanh"},
                                 {"lr", "0.01"},
                                 {"label_smoothing", "0.0"}}));
    EXPECT_EQ(r["tags"]["team"], "hpu");
    EXPECT_EQ(r["tags"]["mlflow.runName"], name);
    EXPECT_EQ(r["tags"]["mlflow.source.name"], "hpu-train");
    EXPECT_EQ(r["tags"]["mlflow.source.type"], "LOCAL");
    EXPECT_EQ(r["artifacts"], json({"config.yaml"}));
    if (name == "failed") continue;

    // Every metric's history: metrics.csv's column, step by step; the latest value its last.
    const std::map<std::string, Points> csv = csvMetrics(version.at(name), /*once=*/false);
    std::map<std::string, Points> history;
    for (const auto& [key, list] : r["history"].items()) {
      history[key] = points(list);
      for (const json& p : list) EXPECT_GT(p[2].get<std::int64_t>(), 1'600'000'000'000) << key;  // ms timestamps
      EXPECT_EQ(r["metrics"][key].get<double>(), history[key].back().second) << key;
    }
    EXPECT_EQ(history, csv);
    EXPECT_EQ(stepsOf(history["train_loss"]), range(0, name == "one-device" ? 32 : 16));
  }
  // Two devices halve the steps; the restarted run ends with the uninterrupted run's history.
  EXPECT_EQ(stepsOf(points(runs["two-devices"]["history"]["val_loss"])), (std::vector<std::int64_t>{7, 15}));
  const auto withoutTimes = [](json history) {
    for (auto it = history.begin(); it != history.end(); ++it)
      for (json& p : *it) p.erase(2);
    return history;
  };
  EXPECT_EQ(withoutTimes(runs["restarted"]["history"]), withoutTimes(runs["two-devices"]["history"]));
}

}  // namespace
}  // namespace hpu::cli::testing
