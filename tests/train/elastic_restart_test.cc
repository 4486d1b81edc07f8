// Elastic restarts through the binary (trainer.max_restarts, HPU_MAX_RESTARTS):
// a rank that crashes at a chosen step (HPU_FAULT, comm/fault_injection.h)
// makes the launcher start every rank again from the newest complete
// checkpoint, and the run ends with the bits and the metrics of a run that
// was never interrupted; a rank that crashes every time makes it give up
// after the allowed restarts, naming the failure with its last lines; nodes'
// launchers meet again before a restart, and a node that does not come back
// fails the job, named. Every run is on loopback with a hard deadline.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "hpu/comm/free_port.h"
#include "train_support.h"

namespace hpu::cli::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

// BoringModel with state everywhere: Adam, StepLR, a checkpoint every 10
// steps (and last.ckpt), 2 epochs of 32 steps.
constexpr const char* kConfig = R"(trainer:
  max_epochs: 2
  log_every_n_steps: 5
  callbacks:
    - {class_path: ModelCheckpoint, init_args: {every_n_train_steps: 10, save_last: true}}
optimizer: {class_path: Adam, init_args: {lr: 0.01}}
lr_scheduler: {class_path: StepLR, init_args: {step_size: 1, gamma: 0.5}}
)";

class ElasticRestartTest : public TrainRunTest {
 protected:
  void SetUp() override {
    env()["HPU_LOG_LEVEL"] = "info";  // the launcher's and the resumed rank's reports
    env()["HPU_PEER_TIMEOUT"] = "2s";
    env()["HPU_RESTART_BACKOFF"] = "10ms";
  }
  RunResult fit(const std::vector<std::string>& args) {
    std::vector<std::string> all{"-c", write("elastic.yaml", kConfig)};
    all.insert(all.end(), args.begin(), args.end());
    return boring("fit", all);
  }
  core::checkpoint::Checkpoint last(const std::string& version) const {
    return readCheckpoint(dir() / "lightning_logs" / version / "checkpoints" / "last.ckpt");
  }
  // Runs without faults (version_0), then with `fault` and max_restarts=2
  // (version_1): the same weights, optimizer state and metrics.
  void expectRestartToTheUninterruptedRun(const std::string& devices, const std::string& fault) {
    const RunResult reference = fit({"--trainer.devices=" + devices});
    ASSERT_EQ(reference.exit_code, 0) << reference.describe();
    env()["HPU_FAULT"] = fault;
    const RunResult r = fit({"--trainer.devices=" + devices, "--trainer.max_restarts=2"});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_THAT(r.err, ContainsRegex("rank 1: local rank 1 \\(pid [0-9]+\\) was killed by signal 9 \\(Killed\\); "
                                     "restarting every rank from the newest checkpoint in 10ms \\(restart 1 of 2"));
    EXPECT_THAT(r.err, HasSubstr("restart 1: resuming from the newest complete checkpoint"));
    EXPECT_THAT(r.err, HasSubstr("global step 20"));
    EXPECT_THAT(r.err, Not(HasSubstr("restart 2")));
    expectSameState(last("version_1"), last("version_0"));
    EXPECT_EQ(metrics("lightning_logs/version_1").rows, metrics("lightning_logs/version_0").rows);
    EXPECT_FALSE(std::filesystem::exists(dir() / "lightning_logs" / "version_2"));
  }
};

TEST_F(ElasticRestartTest, OneDeviceCrashedAfterACheckpointEndsWithTheUninterruptedBits) {
  // Rank 1 of one device does not exist: the crash is rank 0's.
  const RunResult reference = fit({});
  ASSERT_EQ(reference.exit_code, 0) << reference.describe();
  env()["HPU_FAULT"] = "crash,rank=0,step=25,restart=0";
  const RunResult r = fit({"--trainer.max_restarts=1"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.err, ContainsRegex("rank 0: local rank 0 \\(pid [0-9]+\\) was killed by signal 9"));
  expectSameState(last("version_1"), last("version_0"));
  EXPECT_EQ(metrics("lightning_logs/version_1").rows, metrics("lightning_logs/version_0").rows);
}

TEST_F(ElasticRestartTest, TwoDevicesRankOneCrashedAfterACheckpointEndsWithTheUninterruptedBits) {
  expectRestartToTheUninterruptedRun("2", "crash,rank=1,step=25,restart=0");
}

TEST_F(ElasticRestartTest, ACrashBeforeTheFirstCheckpointStartsOverFromScratch) {
  const RunResult reference = fit({"--trainer.devices=2"});
  ASSERT_EQ(reference.exit_code, 0) << reference.describe();
  env()["HPU_FAULT"] = "crash,rank=1,step=4,restart=0";
  const RunResult r = fit({"--trainer.devices=2", "--trainer.max_restarts=1"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("restart 1: no checkpoint of this run yet; starting from scratch"));
  expectSameState(last("version_1"), last("version_0"));
  EXPECT_EQ(metrics("lightning_logs/version_1").rows, metrics("lightning_logs/version_0").rows);
}

TEST_F(ElasticRestartTest, HpuMaxRestartsAppliesWhenTheConfigLeavesItUnset) {
  env()["HPU_MAX_RESTARTS"] = "1";
  env()["HPU_FAULT"] = "crash,rank=0,step=3,restart=0";
  const RunResult r = fit({"--trainer.max_epochs=1"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("(restart 1 of 1, trainer.max_restarts)"));
  // The config wins over the environment: no launcher, the process itself is the rank that dies.
  const RunResult none = fit({"--trainer.max_epochs=1", "--trainer.max_restarts=0"});
  EXPECT_EQ(none.signal, 9) << none.describe();
  EXPECT_THAT(none.err, Not(HasSubstr("restart")));
}

TEST_F(ElasticRestartTest, ARankThatCrashesEveryTimeMakesTheLauncherGiveUpNamingIt) {
  env()["HPU_FAULT"] = "crash,rank=1,step=3";  // every round
  const RunResult r = fit({"--trainer.devices=2", "--trainer.max_restarts=2"});
  EXPECT_EQ(r.exit_code, 128 + 9) << r.describe();
  EXPECT_THAT(r.err, ContainsRegex("\\[launcher\\] error: rank 1: local rank 1 \\(pid [0-9]+\\) was killed by signal 9 "
                                   "\\(Killed\\), and the 2 restarts of trainer.max_restarts are used up; its last "
                                   "lines:\n.*\n?.*rank 1: fault injected at step 3 \\(HPU_FAULT\\): crash \\(SIGKILL\\)"));
  EXPECT_THAT(r.err, ContainsRegex("earlier rounds:\n  round 0: rank 1: local rank 1 \\(pid [0-9]+\\) was killed by "
                                   "signal 9 \\(Killed\\)\n  round 1: rank 1: local rank 1 \\(pid [0-9]+\\) was "
                                   "killed by signal 9 \\(Killed\\)"));
  EXPECT_THAT(r.err, HasSubstr("(restart 2 of 2, trainer.max_restarts)"));
}

TEST_F(ElasticRestartTest, AnErrorEveryTimeGivesUpWithExitCodeOneAndTheErrorInTheLastLines) {
  env()["HPU_FAULT"] = "error,rank=0,step=3";
  const RunResult r = fit({"--trainer.max_restarts=1"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_THAT(r.err, ContainsRegex("rank 0: local rank 0 \\(pid [0-9]+\\) exited with code 1, and the 1 restart of "
                                   "trainer.max_restarts are used up; its last lines:\n(    .*\n)*    .*rank 0: "
                                   "fault injected at step 3 \\(HPU_FAULT\\): error"));
}

TEST_F(ElasticRestartTest, AUsageErrorInAWorkerIsNotRestarted) {
  const RunResult r = fit({"--trainer.max_restarts=3", "--trainer.val_check_interval=1000"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, ContainsRegex("rank 0: local rank 0 \\(pid [0-9]+\\) exited with code 2, which is not restarted: "
                                   "exit code 2 fails the same way again; its last lines:\n.*"
                                   "trainer.val_check_interval \\(1000\\) must be less than or equal to the number "
                                   "of the training batches"));
  EXPECT_THAT(r.err, Not(HasSubstr("restarting")));
}

TEST_F(ElasticRestartTest, RestartsNeedTheLauncherToStartTheRanks) {
  env()["LOCAL_RANK"] = "0";
  env()["MASTER_ADDR"] = "127.0.0.1";
  env()["MASTER_PORT"] = "29999";
  env()["WORLD_SIZE"] = "1";
  env()["NODE_RANK"] = "0";
  const RunResult r = fit({"--trainer.max_restarts=3"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("trainer.max_restarts=3: restarts need hpu-train to start this node's ranks itself, "
                               "but LightningEnvironment started this process (rank 0)"));
}

// Two nodes of one device, as scripts/local-cluster.sh starts them: each
// node's launcher is an agent; rank 1 (node 1) crashes after a checkpoint.
TEST_F(ElasticRestartTest, TwoNodesMeetAgainAndEndWithTheUninterruptedBits) {
  const std::vector<std::string> args{"--nodes", "2", "--devices", "1", "--bin", trainBinary(), "--", "fit",
                                      "-c",      boringConfig(), "-c", write("elastic.yaml", kConfig),
                                      "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false"};
  const RunResult reference = runScript("local-cluster.sh", args, std::chrono::minutes(3));
  ASSERT_EQ(reference.exit_code, 0) << reference.describe();
  env()["HPU_FAULT"] = "crash,rank=1,step=25,restart=0";
  std::vector<std::string> elastic = args;
  elastic.push_back("--trainer.max_restarts=1");
  const RunResult r = runScript("local-cluster.sh", elastic, std::chrono::minutes(3));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, ContainsRegex("\\[node 1\\] \\[launcher\\] warning: node 1: rank 1: local rank 0 \\(pid "
                                   "[0-9]+\\) was killed by signal 9 \\(Killed\\); restarting"));
  EXPECT_THAT(r.out, HasSubstr("[node 0] [launcher] info: node 0: restart 1 of 1: starting 1 local ranks"));
  EXPECT_THAT(r.out, HasSubstr("[node 1] [launcher] info: node 1: restart 1 of 1: starting 1 local ranks"));
  expectSameState(last("version_1"), last("version_0"));
}

// Node 1's launcher waits far longer than the rendezvous timeout before it
// would come back: node 0's gives up at HPU_RENDEZVOUS_TIMEOUT, naming node 1.
TEST_F(ElasticRestartTest, ANodeThatDoesNotComeBackFailsTheJobNamingIt) {
  const std::string command = trainBinary() + " fit -c " + boringConfig() + " -c " + write("elastic.yaml", kConfig) +
                              " --trainer.enable_progress_bar=false --trainer.num_nodes=2 --trainer.max_restarts=1";
  env()["MASTER_ADDR"] = "127.0.0.1";
  env()["WORLD_SIZE"] = "2";
  env()["HPU_JOB_TOKEN"] = "elastic-test-token-0123456789";
  env()["HPU_RENDEZVOUS_TIMEOUT"] = "3s";
  env()["HPU_FAULT"] = "crash,rank=1,step=5,restart=0";
  write("two_nodes.sh", "port=$1\n"
                        "NODE_RANK=1 MASTER_PORT=$port HPU_RESTART_BACKOFF=10m " + command + " 2>node1.log &\n"
                        "NODE_RANK=0 MASTER_PORT=$port " + command + "\n"
                        "code=$?\nkill -9 $!\nexit $code\n");
  RunOptions o;
  o.cwd = dir();
  o.env = env();
  o.timeout = std::chrono::minutes(2);
  const RunResult r = runProgram("/bin/bash", {"two_nodes.sh", std::to_string(comm::pickFreePort("127.0.0.1"))}, o);
  EXPECT_EQ(r.exit_code, 1) << r.describe() << read("node1.log");
  EXPECT_THAT(r.err, HasSubstr("node 0: the nodes' launchers did not meet for round 1"));
  EXPECT_THAT(r.err, HasSubstr("missing: 1"));
  EXPECT_THAT(read("node1.log"), HasSubstr("restarting every rank from the newest checkpoint in 600s"));
}

}  // namespace
}  // namespace hpu::cli::testing
