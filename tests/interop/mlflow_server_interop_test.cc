// MLFlowLogger on a real MLflow tracking server (`mlflow server`, sqlite
// backend store, artifacts through the server, a loopback port), started
// from .venv/interop by tests/interop/check_mlflow_server.py, which runs
// hpu-train in each case and reads back with mlflow's MlflowClient: every
// metric at its step with metrics.csv's value (one device and two, rank 0
// logging), params, tags, status (FINISHED, FAILED, KILLED), the config and
// the checkpoints as artifacts; a server stopped for 3 s loses nothing; a
// server that dies leaves the rest of the run in the local file store; an
// unreachable server is an error naming it before training, unless
// MLFLOW_TRACKING_OFFLINE=true; the server's own error is shown; a bearer
// token (MLFLOW_TRACKING_TOKEN) checked by a gateway; https with mlflow's
// basic-auth app and a certificate of the test's own.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "interop_python.h"
#include "train_support.h"

namespace hpu::cli::testing {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

// A metric's (step, value) points, sorted (MLflow keeps no order within a step).
using History = std::map<std::string, std::vector<std::pair<std::int64_t, double>>>;

History history(const json& by_key) {
  History out;
  for (const auto& [key, points] : by_key.items()) {
    auto& h = out[key];
    for (const json& p : points) h.emplace_back(p[0].get<std::int64_t>(), p[1].get<double>());
    std::sort(h.begin(), h.end());
  }
  return out;
}

// Each metric's distinct points.
std::map<std::string, std::set<std::pair<std::int64_t, double>>> distinct(const History& h) {
  std::map<std::string, std::set<std::pair<std::int64_t, double>>> out;
  for (const auto& [key, points] : h) out[key].insert(points.begin(), points.end());
  return out;
}

// A tracking server's store keeps a point once per (key, step, value,
// timestamp): two equal values logged at one step within a millisecond (the
// epoch, logged by a step's batch and by the validation that ends it) are one
// point there. So the server must hold every distinct point of metrics.csv
// and no other; a failure lists the points one side lacks.
void expectSameDistinctPoints(const History& server, const History& csv) {
  const auto held = distinct(server), logged = distinct(csv);
  std::ostringstream missing;
  for (const auto& [mine, theirs, where] : {std::tuple{&held, &logged, "the server"}, {&logged, &held, "metrics.csv"}})
    for (const auto& [key, points] : *mine)
      for (const auto& p : points)
        if (!theirs->contains(key) || !theirs->at(key).contains(p))
          missing << key << ": step " << p.first << " = " << p.second << " only in " << where << "\n";
  EXPECT_EQ(held, logged) << missing.str();
}

History merged(History a, const History& b) {
  for (const auto& [key, points] : b) {
    auto& h = a[key];
    h.insert(h.end(), points.begin(), points.end());
    std::sort(h.begin(), h.end());
  }
  return a;
}

class MlflowServerInteropTest : public HpuTrainTest {
 protected:
  void SetUp() override { HPU_REQUIRE_INTEROP_PYTHON(); }
};

TEST_F(MlflowServerInteropTest, RunsReachTheServerWholeThroughOutagesAndEndWithTheirStatus) {
  const RunResult judged = interop::runPythonScript(
      "tests/interop/check_mlflow_server.py",
      {trainBinary(), sourcePath("configs/fashion_mnist_mlp.yaml").string(), dir().string(), (dir() / "seen.json").string()},
      dir(), std::chrono::seconds(800));
  std::cout << judged.out;
  ASSERT_EQ(judged.exit_code, 0) << judged.describe() << judged.out;
  const json seen = json::parse(read("seen.json"));
  EXPECT_EQ(seen["versions"]["mlflow"], "3.17.2");

  // One device and two: a run each (rank 0 logs), every value of metrics.csv.
  const json& served = seen["served"];
  ASSERT_EQ(served["runs"].size(), 2u) << served.dump().substr(0, 2000);
  for (const json& run : served["runs"]) {
    const std::string name = run["run_name"];
    SCOPED_TRACE(name);
    ASSERT_EQ(served[name]["fit"]["exit_code"], 0) << served[name]["fit"]["stderr"];
    EXPECT_EQ(run["status"], "FINISHED");
    EXPECT_GE(run["end_time"].get<std::int64_t>(), run["start_time"].get<std::int64_t>());
    EXPECT_EQ(run["params"], json({{"hidden", "[256, 128]"},
                                   {"dropout", "0.2"},
                                   {"activation", "relu"},
                                   {"lr", "0.001"},
                                   {"label_smoothing", "0.0"}}));
    EXPECT_EQ(run["tags"]["team"], "hpu");
    EXPECT_EQ(run["tags"]["mlflow.runName"], name);
    EXPECT_EQ(run["tags"]["mlflow.source.name"], "hpu-train");
    const History h = history(run["history"]);
    expectSameDistinctPoints(h, history(served[name]["csv"]));
    EXPECT_EQ(h.at("train_loss").size(), 16u) << "2 epochs of 8 batches (per rank)";
    for (const auto& [key, points] : run["history"].items())
      for (const json& p : points) EXPECT_GT(p[2].get<std::int64_t>(), 1'600'000'000'000) << key;  // ms timestamps
    // log_model: the checkpoints that remain, each under its stem, and the config.
    std::vector<std::string> artifacts;
    for (const auto& [path, size] : run["artifacts"].items()) artifacts.push_back(path);
    EXPECT_THAT(artifacts,
                ::testing::ElementsAre("config.yaml", "epoch=1-step=16/epoch=1-step=16.ckpt", "last/last.ckpt"));
    EXPECT_GT(run["artifacts"]["last/last.ckpt"].get<std::int64_t>(), 1'000'000);
  }

  // Stopped for 3 s, then back: retried, and every value arrived.
  const json& outage = seen["outage"];
  ASSERT_EQ(outage["fit"]["exit_code"], 0) << outage["fit"]["stderr"];
  ASSERT_EQ(outage["running_at_stop"], true) << "the run ended before the server stopped: lengthen it";
  EXPECT_THAT(outage["fit"]["stderr"].get<std::string>(), HasSubstr("retrying for up to"));
  EXPECT_THAT(outage["fit"]["stderr"].get<std::string>(), HasSubstr("answers again; nothing was lost"));
  ASSERT_EQ(outage["runs"].size(), 1u);
  EXPECT_EQ(outage["runs"][0]["status"], "FINISHED");
  expectSameDistinctPoints(history(outage["runs"][0]["history"]), history(outage["csv"]));

  // Killed by the server's death: the run goes on into the file store; the
  // server's part and the spool's hold every value, the spool the status.
  const json& down = seen["down"];
  ASSERT_EQ(down["fit"]["exit_code"], 0) << down["fit"]["stderr"];
  ASSERT_EQ(down["running_at_stop"], true) << "the run ended before the server died: lengthen it";
  const std::string down_err = down["fit"]["stderr"];
  EXPECT_THAT(down_err, HasSubstr("giving up on the tracking server"));
  EXPECT_THAT(down_err, HasSubstr("go to the local file store spool"));
  ASSERT_EQ(down["served"].size(), 1u);
  ASSERT_EQ(down["spooled"].size(), 1u);
  EXPECT_EQ(down["spooled"][0]["run_id"], down["served"][0]["run_id"]);
  EXPECT_EQ(down["spooled"][0]["status"], "FINISHED");
  // A request the server stored as it died, its answer lost, is also in the
  // spool: every value is there, some perhaps twice.
  expectSameDistinctPoints(merged(history(down["served"][0]["history"]), history(down["spooled"][0]["history"])),
                           history(down["csv"]));

  // SIGTERM: the run ends KILLED and the process dies of the signal.
  const json& killed = seen["killed"];
  EXPECT_EQ(killed["fit"]["exit_code"], -15) << killed["fit"]["stderr"];
  ASSERT_EQ(killed["runs"].size(), 1u);
  EXPECT_EQ(killed["runs"][0]["status"], "KILLED");

  const json& failed = seen["failed"];
  EXPECT_NE(failed["fit"]["exit_code"], 0);
  ASSERT_EQ(failed["runs"].size(), 1u);
  EXPECT_EQ(failed["runs"][0]["status"], "FAILED");

  // The server's own words.
  EXPECT_EQ(seen["refused"]["fit"]["exit_code"], 1);
  EXPECT_THAT(seen["refused"]["fit"]["stderr"].get<std::string>(),
              HasSubstr("RESOURCE_DOES_NOT_EXIST: Run with id=0123456789abcdef0123456789abcdef not found"));

  // A bearer token: every request carries it; a wrong one is the gateway's 401.
  const json& tokened = seen["tokened"];
  ASSERT_EQ(tokened["fit"]["exit_code"], 0) << tokened["fit"]["stderr"];
  EXPECT_EQ(tokened["authorizations"], json::array({"Bearer hpu-train-token-2026"}));
  EXPECT_GT(tokened["requests"].get<int>(), 3);
  ASSERT_EQ(tokened["runs"].size(), 1u);
  EXPECT_EQ(tokened["runs"][0]["status"], "FINISHED");
  expectSameDistinctPoints(history(tokened["runs"][0]["history"]), history(tokened["csv"]));
  EXPECT_EQ(tokened["wrong_token"]["exit_code"], 1);
  EXPECT_THAT(tokened["wrong_token"]["stderr"].get<std::string>(),
              HasSubstr("answered GET /api/2.0/mlflow/experiments/get-by-name with HTTP 401: UNAUTHENTICATED: the "
                        "bearer token is not valid"));

  // https with basic authentication: the run arrives; a wrong password is
  // the server's 401, an untrusted certificate says which setting trusts it.
  const json& secured = seen["secured"];
  ASSERT_EQ(secured["fit"]["exit_code"], 0) << secured["fit"]["stderr"];
  ASSERT_EQ(secured["runs"].size(), 1u);
  EXPECT_EQ(secured["runs"][0]["status"], "FINISHED");
  expectSameDistinctPoints(history(secured["runs"][0]["history"]), history(secured["csv"]));
  EXPECT_EQ(secured["wrong_password"]["exit_code"], 1);
  EXPECT_THAT(secured["wrong_password"]["stderr"].get<std::string>(),
              HasSubstr("answered GET /api/2.0/mlflow/experiments/get-by-name with HTTP 401: You are not authenticated."));
  EXPECT_EQ(secured["unknown_ca"]["exit_code"], 1);
  EXPECT_THAT(secured["unknown_ca"]["stderr"].get<std::string>(),
              HasSubstr("TLS failed: SSL certificate problem: self-signed certificate; trust the server's certificate "
                        "with MLFLOW_TRACKING_SERVER_CERT_PATH=<PEM of its CA>"));

  // Nobody at the URI: an error naming it before training, at once.
  const json& unreachable = seen["unreachable"];
  EXPECT_EQ(unreachable["fit"]["exit_code"], 1);
  const std::string err = unreachable["fit"]["stderr"];
  EXPECT_THAT(err, ::testing::MatchesRegex("(.|\n)*error: MLflow tracking server http://127.0.0.1:[0-9]+ unreachable "
                                           "(.|\n)*MLFLOW_TRACKING_OFFLINE=true(.|\n)*"));
  EXPECT_THAT(err, ::testing::Not(HasSubstr("Epoch")));
  EXPECT_LT(unreachable["fit"]["seconds"].get<double>(), 30);
  const json& offline = unreachable["offline"];
  ASSERT_EQ(offline["fit"]["exit_code"], 0) << offline["fit"]["stderr"];
  EXPECT_THAT(offline["fit"]["stderr"].get<std::string>(), HasSubstr("MLFLOW_TRACKING_OFFLINE is set"));
  ASSERT_EQ(offline["runs"].size(), 1u);
  EXPECT_EQ(history(offline["runs"][0]["history"]), history(offline["csv"]));
}

}  // namespace
}  // namespace hpu::cli::testing
