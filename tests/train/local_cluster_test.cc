// scripts/local-cluster.sh: K "nodes" on this machine, each started as on a
// real cluster (MASTER_ADDR, MASTER_PORT, NODE_RANK, WORLD_SIZE), meet in one
// rendezvous, train in the caller's directory, and the script exits with the
// first failing node's code. Loopback only; every run has a hard deadline.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "train_support.h"

namespace hpu::cli::testing {
namespace {

using ::testing::HasSubstr;

class LocalClusterTest : public HpuTrainTest {};

TEST_F(LocalClusterTest, TwoNodesOfTwoDevicesTrainInTheCallersDirectory) {
  env()["HPU_LOG_LEVEL"] = "info";
  const RunResult r = runScript("local-cluster.sh", {"--bin", trainBinary(), "--nodes", "2", "--devices", "2", "--",
                                                     "fit", "--config", boringConfig(), "--trainer.max_epochs=1"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("[node 0] [rank 0] info: HPUParallelStrategy: 4 processes on 2 node(s) joined"));
  EXPECT_THAT(r.out, HasSubstr("[node 0] [rank 0] info: rank 0: all 4 ranks joined the rendezvous on 127.0.0.1:"));
  // Only global rank 0 writes, and it writes where the script was started.
  EXPECT_TRUE(std::filesystem::exists(dir() / "lightning_logs/version_0/metrics.csv"));
  EXPECT_FALSE(std::filesystem::exists(dir() / "lightning_logs/version_1"));
}

TEST_F(LocalClusterTest, ExitsWithTheFailingNodesCode) {
  const RunResult r = runScript("local-cluster.sh", {"--bin", trainBinary(), "--nodes", "2", "--devices", "1", "--",
                                                     "fit", "--config", "missing.yaml"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  // Whichever node fails first stops the other, which may not get to print.
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\\[node [01]\\] error: cannot read config file 'missing.yaml'"));
}

TEST_F(LocalClusterTest, AFailingNodeStopsTheOthers) {
  // A stand-in for hpu-train: node 0 records its pid and would run for a
  // minute; node 1 fails once node 0 runs (waiting at most 10 s for it).
  write("node.sh",
        "if [ \"$NODE_RANK\" = 1 ]; then\n"
        "  for i in $(seq 100); do [ -s node0.pid ] && break; sleep 0.1; done\n"
        "  exit 3\n"
        "fi\n"
        "echo $$ > node0.pid\n"
        "exec sleep 60\n");
  std::filesystem::permissions(dir() / "node.sh", std::filesystem::perms::owner_all);
  const RunResult r =
      runScript("local-cluster.sh", {"--bin", (dir() / "node.sh").string(), "--nodes", "2", "--devices", "1", "--", "fit"},
                std::chrono::milliseconds(20000));
  // Node 0 would sleep for 60 s: exit code 3 within the 20 s deadline means
  // the script stopped it rather than waiting for it.
  EXPECT_EQ(r.exit_code, 3) << r.describe();
  const std::string pid = read("node0.pid");
  ASSERT_FALSE(pid.empty());
  // Node 0 is gone (or a zombie on its way out), not left running.
  EXPECT_TRUE(processEnded(pid.substr(0, pid.find('\n')), std::chrono::steady_clock::now() + std::chrono::seconds(10)))
      << "node 0 survived the script";
}

TEST_F(LocalClusterTest, RefusesAnUnknownOption) {
  const RunResult r = runScript("local-cluster.sh", {"--gpus", "2", "--", "fit"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("local-cluster.sh: unknown option '--gpus'"));
}

}  // namespace
}  // namespace hpu::cli::testing
