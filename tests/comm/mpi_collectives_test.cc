// Open MPI as the collectives' backend (HPU_COLLECTIVES, comm/src/mpi/):
// ranks started by mpirun on 127.0.0.1 still meet through the ZeroMQ
// rendezvous and then run every collective on MPI with the reference
// results (the comm_test_rank "collectives" scenario, world sizes 2..4); the
// backend names itself; asking for mpi outside mpirun, or for a backend
// that does not exist, is refused by name; a rank killed mid-allreduce ends
// the job within seconds, named by mpirun. Skipped where mpirun is missing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <memory>

#include <spdlog/fmt/fmt.h>

#include "hpu/comm/free_port.h"
#include "subprocess.h"

namespace hpu::comm {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using test_support::Subprocess;
using Clock = std::chrono::steady_clock;

const std::string kRankBinary = std::string(HPU_BINARY_DIR) + "/comm_test_rank";
const std::string kMpirun = "/usr/bin/mpirun";

std::string outputPath(const std::string& name) {
  static std::atomic<int> counter{0};
  return fmt::format("{}/mpi_{}_{}_{}.log", ::testing::TempDir(), ::getpid(), name, counter++);
}

Environment jobEnv(int port, const std::string& backend) {
  return {{"PATH", "/usr/bin:/bin"},
          {"HOME", ::testing::TempDir()},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)},
          {"HPU_JOB_TOKEN", "mpi-backend-test-token-0123"},
          {"HPU_COLLECTIVES", backend},
          {"HPU_PEER_TIMEOUT", "2s"},
          {"HPU_RENDEZVOUS_TIMEOUT", "60s"},
          {"HPU_COLLECTIVE_TIMEOUT", "60s"}};
}

// mpirun -np `n` comm_test_rank <scenario> n 1, every rank on this machine.
std::unique_ptr<Subprocess> mpirun(int n, const std::string& scenario, const std::string& backend = "mpi") {
  const std::vector<std::string> args{"--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader,tcp",
                                      "--mca", "btl_tcp_if_include", "lo", "-np", std::to_string(n),
                                      "-x", "MASTER_ADDR", "-x", "MASTER_PORT", "-x", "HPU_JOB_TOKEN",
                                      "-x", "HPU_COLLECTIVES", "-x", "HPU_PEER_TIMEOUT", "-x", "HPU_RENDEZVOUS_TIMEOUT",
                                      "-x", "HPU_COLLECTIVE_TIMEOUT", kRankBinary, scenario, std::to_string(n), "1"};
  return std::make_unique<Subprocess>(kMpirun, args, jobEnv(pickFreePort("127.0.0.1"), backend), outputPath(scenario),
                                      /*ownProcessGroup=*/true);
}

class MpiCollectives : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kMpirun)) GTEST_SKIP() << kMpirun << " is not installed (Debian: openmpi-bin)";
  }
};

TEST_P(MpiCollectives, EveryCollectiveMatchesTheReference) {
  const int n = GetParam();
  auto job = mpirun(n, "collectives");
  const auto code = job->wait(Clock::now() + 180s);
  ASSERT_TRUE(code.has_value()) << "mpirun still runs at the deadline:\n" << job->output();
  EXPECT_EQ(*code, 0) << job->output();
  EXPECT_THAT(job->output(), HasSubstr("rank 0: collectives run on Open MPI v"));
  for (int r = 0; r < n; ++r) EXPECT_THAT(job->output(), HasSubstr(fmt::format("rank {}: collectives ok", r)));
}

INSTANTIATE_TEST_SUITE_P(Mpirun, MpiCollectives, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

TEST_F(MpiCollectives, AutoChoosesMpiUnderMpirunAndZmqKeepsTheOwnAlgorithms) {
  auto automatic = mpirun(2, "collectives", "auto");
  ASSERT_EQ(automatic->wait(Clock::now() + 120s).value_or(-1), 0) << automatic->output();
  EXPECT_THAT(automatic->output(), HasSubstr("collectives run on Open MPI"));
  auto own = mpirun(2, "collectives", "zmq");
  ASSERT_EQ(own->wait(Clock::now() + 120s).value_or(-1), 0) << own->output();
  EXPECT_THAT(own->output(), ::testing::Not(HasSubstr("collectives run on Open MPI")));
  EXPECT_THAT(own->output(), HasSubstr("rank 1: collectives ok"));
}

TEST_F(MpiCollectives, MpiOutsideMpirunAndUnknownBackendsAreRefusedByName) {
  const int port = pickFreePort("127.0.0.1");
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < 2; ++r) {
    Environment env = jobEnv(port, "mpi");
    env.set("WORLD_SIZE", "2");
    env.set("NODE_RANK", "0");
    env.set("LOCAL_RANK", std::to_string(r));
    ranks.push_back(std::make_unique<Subprocess>(kRankBinary, std::vector<std::string>{"collectives", "2", "1"}, env,
                                                 outputPath("outside")));
  }
  for (auto& rank : ranks) {
    EXPECT_EQ(rank->wait(Clock::now() + 60s).value_or(-1), 2) << rank->output();
  }
  EXPECT_THAT(ranks[1]->output(),
              HasSubstr("EnvError: HPU_COLLECTIVES=mpi: rank 1 was not started by mpirun (no OMPI_COMM_WORLD_RANK or "
                        "PMIX_RANK in its environment; the cluster environment is LightningEnvironment); launch with "
                        "mpirun -np 2 -x MASTER_ADDR -x MASTER_PORT, or use HPU_COLLECTIVES=zmq"));
  Environment env = jobEnv(port, "nccl");
  env.set("WORLD_SIZE", "2");
  Subprocess bogus(kRankBinary, {"collectives", "2", "1"}, env, outputPath("bogus"));
  EXPECT_EQ(bogus.wait(Clock::now() + 30s).value_or(-1), 2);
  EXPECT_THAT(bogus.output(), HasSubstr("EnvError: HPU_COLLECTIVES='nccl' is not a backend; use auto, zmq or mpi"));
}

TEST_F(MpiCollectives, ARankKilledMidAllreduceEndsTheJobNamedByMpirun) {
  auto job = mpirun(2, "allreduce-loop");
  ASSERT_TRUE(job->waitForOutput("rank 1: looping", Clock::now() + 60s)) << job->output();
  // The ranks are mpirun's children; kill one of them.
  const std::string pids = [&] {
    FILE* p = ::popen(fmt::format("pgrep -P {} -x comm_test_rank", job->pid()).c_str(), "r");
    std::string out(256, '\0');
    out.resize(std::fread(out.data(), 1, out.size(), p));
    ::pclose(p);
    return out;
  }();
  std::vector<pid_t> ranks;
  for (std::size_t at = 0; at < pids.size();) {
    const std::size_t end = pids.find('\n', at);
    ranks.push_back(static_cast<pid_t>(std::stol(pids.substr(at, end - at))));
    at = end == std::string::npos ? pids.size() : end + 1;
  }
  ASSERT_EQ(ranks.size(), 2u) << pids;
  ::kill(ranks[1], SIGKILL);
  const auto code = job->wait(Clock::now() + 30s);
  ASSERT_TRUE(code.has_value()) << "the job did not end after a rank was killed:\n" << job->output();
  EXPECT_NE(*code, 0);
  EXPECT_THAT(job->output(), HasSubstr("exited on signal 9 (Killed)"));
}

}  // namespace
}  // namespace hpu::comm
