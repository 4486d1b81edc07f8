// The local launcher, driven through build/comm_test_rank acting as the
// program a user starts with trainer.devices = N: a failing worker stops the
// others and sets the exit code, signals reach every worker, nothing
// outlives the launcher.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include <spdlog/fmt/fmt.h>

#include "hpu/env/environment.h"
#include "subprocess.h"

namespace hpu::comm {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using test_support::processGone;
using test_support::Subprocess;
using Clock = std::chrono::steady_clock;

const std::string kRankBinary = std::string(HPU_BINARY_DIR) + "/comm_test_rank";

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    base_ = fmt::format("{}/launcher_{}_{}", ::testing::TempDir(), ::getpid(), counter++);
  }

  // Starts the "user's program" with `devices` local ranks in launch `mode`.
  Subprocess& start(int devices, const std::string& mode) {
    Environment env{{"HPU_TEST_PID_FILE", pidFile()}, {"HPU_PEER_TIMEOUT", "2s"}, {"PATH", "/usr/bin:/bin"}};
    launcher_ = std::make_unique<Subprocess>(kRankBinary,
                                             std::vector<std::string>{"launch", std::to_string(devices), "1", mode},
                                             env, base_ + ".log");
    return *launcher_;
  }

  // The worker pids the launcher recorded (waits until there are `count`).
  std::vector<pid_t> workerPids(std::size_t count) {
    const auto deadline = Clock::now() + 30s;
    while (Clock::now() < deadline) {
      std::ifstream in(pidFile());
      std::vector<pid_t> pids;
      for (pid_t pid; in >> pid;) pids.push_back(pid);
      if (pids.size() == count) return pids;
      std::this_thread::sleep_for(20ms);
    }
    ADD_FAILURE() << "the launcher did not record " << count << " workers:\n" << launcher_->output();
    return {};
  }

  void expectAllGone(const std::vector<pid_t>& pids) {
    for (pid_t pid : pids) {
      EXPECT_TRUE(processGone(pid, Clock::now() + 15s)) << "worker " << pid << " outlived the launcher";
    }
  }

  void TearDown() override {
    // Whatever the outcome, no worker may survive the test.
    std::ifstream in(pidFile());
    for (pid_t pid; in >> pid;) ::kill(pid, SIGKILL);
  }

  std::string pidFile() const { return base_ + ".pids"; }

  std::string base_;
  std::unique_ptr<Subprocess> launcher_;
};

TEST_F(LauncherTest, LaunchedRanksJoinWithAGeneratedTokenAndAPickedPort) {
  Subprocess& launcher = start(3, "join");
  EXPECT_EQ(launcher.wait(Clock::now() + 60s), 0) << launcher.output();
  expectAllGone(workerPids(2));
}

TEST_F(LauncherTest, FailingWorkerStopsTheOthersAndSetsTheExitCode) {
  Subprocess& launcher = start(4, "worker-fails");
  const auto pids = workerPids(3);
  const auto code = launcher.wait(Clock::now() + 60s);
  ASSERT_TRUE(code.has_value()) << launcher.output();
  EXPECT_EQ(*code, 7) << launcher.output();
  EXPECT_THAT(launcher.output(), ::testing::ContainsRegex("local rank 2 \\(pid [0-9]+\\) exited with code 7; "
                                                          "stopping the other local ranks"));
  EXPECT_THAT(launcher.output(), ::testing::Not(HasSubstr("outlived")));
  expectAllGone(pids);
}

TEST_F(LauncherTest, SigtermToTheLauncherReachesEveryWorker) {
  Subprocess& launcher = start(3, "wait-for-signal");
  const auto pids = workerPids(2);
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_TRUE(launcher.waitForOutput(fmt::format("local rank {}: waiting", rank), Clock::now() + 30s))
        << launcher.output();
  }
  launcher.signal(SIGTERM);
  const auto code = launcher.wait(Clock::now() + 30s);
  ASSERT_TRUE(code.has_value()) << launcher.output();
  EXPECT_EQ(*code, 128 + SIGTERM) << launcher.output();
  for (int rank = 1; rank < 3; ++rank) {
    EXPECT_TRUE(std::filesystem::exists(fmt::format("{}.rank{}", pidFile(), rank))) << "local rank " << rank;
  }
  expectAllGone(pids);
}

TEST_F(LauncherTest, KilledLauncherLeavesNoOrphans) {
  Subprocess& launcher = start(3, "wait-for-signal");
  const auto pids = workerPids(2);
  ASSERT_TRUE(launcher.waitForOutput("local rank 2: waiting", Clock::now() + 30s)) << launcher.output();
  launcher.signal(SIGKILL);
  EXPECT_EQ(launcher.wait(Clock::now() + 30s), 128 + SIGKILL);
  expectAllGone(pids);
}

TEST_F(LauncherTest, RankZeroFailureTearsTheWorkersDown) {
  Subprocess& launcher = start(3, "rank0-fails");
  const auto pids = workerPids(2);
  EXPECT_EQ(launcher.wait(Clock::now() + 60s), 1) << launcher.output();
  EXPECT_THAT(launcher.output(), HasSubstr("Error: rank 0 failed on purpose"));
  EXPECT_THAT(launcher.output(), ::testing::Not(HasSubstr("outlived")));
  expectAllGone(pids);
}

}  // namespace
}  // namespace hpu::comm
