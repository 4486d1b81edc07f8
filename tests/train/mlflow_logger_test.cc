// MLFlowLogger writes MLflow's file store as mlflow's FileStore reads it:
// the Default experiment of a new store, the named experiment found or
// created, one folder per run with meta.yaml, metrics/<key> lines
// "timestamp value step" (the values of metrics.csv, logged beside them),
// params, tags and the config as an artifact; the run's status at its end.
// WandbLogger is refused with the alternative.
#include <gmock/gmock.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "train_support.h"

namespace hpu::cli::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

class MLFlowLoggerTest : public TrainRunTest {
 protected:
  // A run logging to MLflow (experiment "exp") and CSV; returns its result.
  RunResult fitLogged(const std::vector<std::string>& args) {
    write("loggers.yaml", R"(trainer:
  log_every_n_steps: 16
  logger:
    - class_path: lightning.pytorch.loggers.MLFlowLogger
      init_args: {experiment_name: exp, run_name: first, tags: {team: hpu}}
    - CSVLogger
)");
    std::vector<std::string> full{"-c", "loggers.yaml", "--trainer.max_epochs=2"};
    full.insert(full.end(), args.begin(), args.end());
    return boring("fit", full);
  }
  // The experiment folders of mlruns/ other than the Default one.
  std::vector<fs::path> experiments() const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir() / "mlruns"))
      if (e.is_directory() && e.path().filename() != "0" && e.path().filename() != ".trash") out.push_back(e.path());
    return out;
  }
  static std::vector<fs::path> runs(const fs::path& experiment) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(experiment))
      if (e.is_directory()) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
  }
};

TEST_F(MLFlowLoggerTest, WritesTheFileStoreLayout) {
  const RunResult fit = fitLogged({});
  ASSERT_EQ(fit.exit_code, 0) << fit.describe();
  EXPECT_TRUE(fs::is_directory(dir() / "mlruns/.trash"));
  const std::string default_meta = readFile(dir() / "mlruns/0/meta.yaml");
  EXPECT_THAT(default_meta, HasSubstr("experiment_id: '0'\n"));
  EXPECT_THAT(default_meta, HasSubstr("name: Default\n"));

  const std::vector<fs::path> exps = experiments();
  ASSERT_EQ(exps.size(), 1u);
  const std::string exp_id = exps[0].filename().string();
  EXPECT_TRUE(std::regex_match(exp_id, std::regex("[1-9][0-9]{17}"))) << exp_id;
  const std::string exp_meta = readFile(exps[0] / "meta.yaml");
  EXPECT_TRUE(std::regex_match(exp_meta, std::regex("artifact_location: file://" + fs::absolute(exps[0]).string() +
                                                    "\ncreation_time: [0-9]{13}\nexperiment_id: '" + exp_id +
                                                    "'\nlast_update_time: [0-9]{13}\nlifecycle_stage: active\n"
                                                    "name: exp\n")))
      << exp_meta;

  const std::vector<fs::path> rs = runs(exps[0]);
  ASSERT_EQ(rs.size(), 1u);
  const fs::path run = rs[0];
  const std::string run_id = run.filename().string();
  EXPECT_TRUE(std::regex_match(run_id, std::regex("[0-9a-f]{32}"))) << run_id;
  const std::string meta = readFile(run / "meta.yaml");
  EXPECT_TRUE(std::regex_match(
      meta, std::regex("artifact_uri: file://" + fs::absolute(run).string() +
                       "/artifacts\ndeleted_time: null\nend_time: [0-9]{13}\nentry_point_name: ''\nexperiment_id: '" +
                       exp_id + "'\nlifecycle_stage: active\nrun_id: " + run_id + "\nrun_name: first\nrun_uuid: " +
                       run_id + "\nsource_name: ''\nsource_type: 4\nsource_version: ''\nstart_time: [0-9]{13}\n"
                                "status: 3\ntags: \\[\\]\nuser_id: .+\n")))
      << meta;

  EXPECT_EQ(readFile(run / "params/out_features"), "2");
  EXPECT_EQ(readFile(run / "params/lr"), "0.1");
  EXPECT_EQ(readFile(run / "tags/mlflow.runName"), "first");
  EXPECT_EQ(readFile(run / "tags/mlflow.source.type"), "LOCAL");
  EXPECT_EQ(readFile(run / "tags/team"), "hpu");
  EXPECT_THAT(readFile(run / "artifacts/config.yaml"), HasSubstr("experiment_name: exp"));
  // The first logger's directory is the run's: checkpoints land in the MLflow run.
  EXPECT_THAT(fileNames(run / "checkpoints"), ElementsAre("epoch=1-step=64.ckpt"));

  // Every metric's lines: the values and steps metrics.csv has, in order.
  const CsvTable m = metrics();
  const std::vector<std::string> steps = m.column("step");
  EXPECT_THAT(fileNames(run / "metrics"), ElementsAre("epoch", "train_loss", "val_loss"));
  for (const std::string key : {"epoch", "train_loss", "val_loss"}) {
    std::vector<std::pair<double, std::string>> expected, logged;
    const std::vector<std::string> column = m.column(key);
    for (std::size_t r = 0; r < column.size(); ++r)
      if (!column[r].empty()) expected.emplace_back(std::stod(column[r]), steps[r]);
    std::istringstream lines(readFile(run / "metrics" / key));
    std::string line;
    while (std::getline(lines, line)) {
      std::smatch parts;
      ASSERT_TRUE(std::regex_match(line, parts, std::regex("([0-9]{13}) (\\S+) ([0-9]+)"))) << key << ": " << line;
      logged.emplace_back(std::stod(parts[2]), parts[3]);
    }
    EXPECT_EQ(logged, expected) << key;
  }
  EXPECT_EQ(readFile(run / "metrics/epoch").substr(14, 4), "0.0 ");  // Python's str() of a float

  // Another run of the same experiment joins it.
  ASSERT_EQ(fitLogged({}).exit_code, 0);
  EXPECT_EQ(experiments().size(), 1u);
  EXPECT_EQ(runs(exps[0]).size(), 2u);
}

// Every rank resumes and ends the stage; only global rank 0 writes the
// run: its start_time stands (other ranks never knew it) and no rank
// rewrites the metric files beside it (its temporaries would be read as
// metrics). Rank 1 of 2 crashes at step 25, after the checkpoint of step 20.
TEST_F(MLFlowLoggerTest, OnlyRankZeroWritesTheRunOfTwoDevicesAcrossARestart) {
  write("elastic.yaml", R"(trainer:
  callbacks:
    - {class_path: ModelCheckpoint, init_args: {every_n_train_steps: 10, save_last: true}}
)");
  env()["HPU_RESTART_BACKOFF"] = "10ms";
  env()["HPU_FAULT"] = "crash,rank=1,step=25,restart=0";
  const RunResult fit = fitLogged({"-c", "elastic.yaml", "--trainer.devices=2", "--trainer.log_every_n_steps=1",
                                   "--trainer.max_restarts=1"});
  ASSERT_EQ(fit.exit_code, 0) << fit.describe();
  ASSERT_THAT(fit.err, HasSubstr("was killed by signal 9"));
  const std::vector<fs::path> rs = runs(experiments().at(0));
  ASSERT_EQ(rs.size(), 1u);
  const std::string meta = readFile(rs[0] / "meta.yaml");
  std::smatch start, end;
  ASSERT_TRUE(std::regex_search(meta, start, std::regex("\nstart_time: ([0-9]+)\n"))) << meta;
  ASSERT_TRUE(std::regex_search(meta, end, std::regex("\nend_time: ([0-9]+)\n"))) << meta;
  EXPECT_EQ(start[1].length(), 13u) << meta;
  EXPECT_LE(std::stoll(start[1]), std::stoll(end[1]));
  EXPECT_THAT(meta, HasSubstr("\nrun_name: first\n"));
  EXPECT_THAT(fileNames(rs[0] / "metrics"), ElementsAre("epoch", "train_loss", "val_loss"));
  std::istringstream lines(readFile(rs[0] / "metrics/train_loss"));
  std::vector<std::string> steps;
  for (std::string line; std::getline(lines, line);) steps.push_back(line.substr(line.rfind(' ') + 1));
  const CsvTable m = metrics();
  std::vector<std::string> logged;
  for (std::size_t r = 0; r < m.rows.size(); ++r)
    if (!m.column("train_loss")[r].empty()) logged.push_back(m.column("step")[r]);
  EXPECT_EQ(steps, logged);
  EXPECT_EQ(steps.size(), 32u);  // 2 epochs of 16 steps a rank, each once
}

TEST_F(MLFlowLoggerTest, AFailedRunIsMarkedFailed) {
  const RunResult fit =
      fitLogged({"--trainer.callbacks+=EarlyStopping", "--trainer.callbacks.monitor=missing_metric"});
  EXPECT_NE(fit.exit_code, 0) << fit.describe();
  const std::vector<fs::path> rs = runs(experiments().at(0));
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_THAT(readFile(rs[0] / "meta.yaml"), HasSubstr("\nstatus: 4\n"));
}

TEST_F(MLFlowLoggerTest, AnUnreachableTrackingServerIsAnErrorNamingItBeforeTraining) {
  // Port 1 of the loopback: nothing listens there.
  const RunResult r = boring("fit", {"--trainer.logger=MLFlowLogger", "--trainer.logger.tracking_uri=http://127.0.0.1:1"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("error: MLflow tracking server http://127.0.0.1:1 unreachable (GET "
                               "/api/2.0/mlflow/experiments/get-by-name): "));
  EXPECT_THAT(r.err, HasSubstr("Start the server (mlflow server --host HOST --port PORT), correct trainer.logger's "
                               "tracking_uri, or set MLFLOW_TRACKING_OFFLINE=true to log to the local file store "
                               "(./mlruns) instead"));
  EXPECT_FALSE(fs::exists(dir() / "lightning_logs")) << "nothing ran";
}

TEST_F(MLFlowLoggerTest, DatabaseAndDatabricksUrisAreRefusedWithTheAlternative) {
  const auto fitWith = [&](const std::string& uri) {
    return boring("fit", {"--trainer.logger=MLFlowLogger", "--trainer.logger.tracking_uri=" + uri});
  };
  const RunResult sqlite = fitWith("sqlite:///mlflow.db");
  EXPECT_EQ(sqlite.exit_code, 2) << sqlite.describe();
  EXPECT_THAT(sqlite.err, HasSubstr("trainer.logger.init_args.tracking_uri: 'sqlite:///mlflow.db': hpu-train does not "
                                    "write MLflow's database directly; serve it with `mlflow server --backend-store-uri "
                                    "sqlite:///mlflow.db --host 127.0.0.1 --port 5000` and set tracking_uri: "
                                    "http://127.0.0.1:5000"));
  const RunResult databricks = fitWith("databricks");
  EXPECT_EQ(databricks.exit_code, 2) << databricks.describe();
  EXPECT_THAT(databricks.err, HasSubstr("'databricks': hpu-train does not read Databricks' profiles; log to an MLflow "
                                        "tracking server (tracking_uri: http://HOST:PORT) or to the file store (save_dir)"));
  const RunResult other = fitWith("ftp://host");
  EXPECT_EQ(other.exit_code, 2) << other.describe();
  EXPECT_THAT(other.err, HasSubstr("'ftp://host': not a tracking URI hpu-train writes"));
}

TEST_F(MLFlowLoggerTest, WandbLoggerIsRefusedWithTheAlternative) {
  const RunResult r = boring("fit", {"--trainer.logger=WandbLogger", "--trainer.logger.offline=true"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("trainer.logger: WandbLogger is not supported"));
  EXPECT_THAT(r.err, HasSubstr("wandb sync lightning_logs/version_N"));
}

}  // namespace
}  // namespace hpu::cli::testing
