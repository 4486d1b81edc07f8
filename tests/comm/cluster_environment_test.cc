// Cluster environments: detection order, resolution, and the exact message
// of every invalid value. No process environment is touched.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>

#include "hpu/comm/cluster_environment.h"
#include "hpu/comm/errors.h"
#include "hpu/comm/slurm_nodelist.h"

namespace hpu::comm {
namespace {

using ::testing::HasSubstr;

std::string envErrorOf(const Environment& env, Topology topology) {
  try {
    resolveClusterInfo(env, topology);
  } catch (const EnvError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no EnvError";
  return "";
}

TEST(ClusterEnvironments, AreRegisteredInDetectionOrderWithStableNames) {
  std::vector<std::string> names;
  for (const auto& factory : clusterEnvironments()) {
    names.emplace_back(factory.name);
    EXPECT_EQ(factory.make()->name(), factory.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"LightningEnvironment", "SLURMEnvironment", "MPIEnvironment",
                                             "TorchElasticEnvironment"}));
}

TEST(ClusterEnvironments, NoVariablesMeansOneProcessOnOneNode) {
  const ClusterInfo info = resolveClusterInfo({}, {1, 1});
  EXPECT_EQ(info.environment, "LightningEnvironment");
  EXPECT_EQ(info.worldSize, 1);
  EXPECT_EQ(info.globalRank, 0);
  EXPECT_EQ(info.masterAddr, "127.0.0.1");
  EXPECT_EQ(info.masterPort, 0);
  EXPECT_FALSE(info.createsProcessesExternally);
}

TEST(ClusterEnvironments, SingleNodeWithDevicesLeavesThePortToTheLauncher) {
  const ClusterInfo info = resolveClusterInfo({}, {8, 1});
  EXPECT_EQ(info.worldSize, 8);
  EXPECT_EQ(info.localWorldSize, 8);
  EXPECT_EQ(info.localRank, 0);
  EXPECT_EQ(info.masterPort, 0);
  EXPECT_FALSE(info.createsProcessesExternally);
}

TEST(ClusterEnvironments, ExplicitPerNodeLaunchAsInTheDocs) {
  const Environment env{{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}, {"NODE_RANK", "1"}, {"WORLD_SIZE", "16"}};
  const ClusterInfo info = resolveClusterInfo(env, {8, 2});
  EXPECT_EQ(info.environment, "LightningEnvironment");
  EXPECT_EQ(info.masterAddr, "10.0.0.1");
  EXPECT_EQ(info.masterPort, 29500);
  EXPECT_EQ(info.nodeRank, 1);
  EXPECT_EQ(info.localRank, 0);
  EXPECT_EQ(info.globalRank, 8);
  EXPECT_EQ(info.worldSize, 16);
  EXPECT_EQ(info.numNodes, 2);
  EXPECT_FALSE(info.createsProcessesExternally);

  Environment worker = env;
  worker.set("LOCAL_RANK", "3");
  const ClusterInfo workerInfo = resolveClusterInfo(worker, {8, 2});
  EXPECT_EQ(workerInfo.globalRank, 11);
  EXPECT_TRUE(workerInfo.createsProcessesExternally);
}

TEST(ClusterEnvironments, GroupRankStandsInForNodeRank) {
  const Environment env{{"MASTER_ADDR", "h"}, {"MASTER_PORT", "1234"}, {"GROUP_RANK", "2"}, {"LOCAL_RANK", "1"}};
  const ClusterInfo info = resolveClusterInfo(env, {4, 3});
  EXPECT_EQ(info.nodeRank, 2);
  EXPECT_EQ(info.globalRank, 9);
  EXPECT_EQ(envErrorOf({{"GROUP_RANK", "3"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}}, {4, 3}),
            "GROUP_RANK=3 is out of range for trainer.num_nodes=3; valid values are 0..2");
}

TEST(ClusterEnvironments, Slurm) {
  const Environment env{{"SLURM_NTASKS", "8"},          {"SLURM_PROCID", "5"}, {"SLURM_LOCALID", "1"},
                   {"SLURM_NODEID", "1"},          {"SLURM_JOB_ID", "123456"},
                   {"SLURM_JOB_NODELIST", "gaudi[07-10,12],login"}};
  const ClusterInfo info = resolveClusterInfo(env, {4, 2});
  EXPECT_EQ(info.environment, "SLURMEnvironment");
  EXPECT_EQ(info.globalRank, 5);
  EXPECT_EQ(info.localRank, 1);
  EXPECT_EQ(info.nodeRank, 1);
  EXPECT_EQ(info.worldSize, 8);
  EXPECT_EQ(info.masterAddr, "gaudi07");
  EXPECT_EQ(info.masterPort, 15000 + 3456);
  EXPECT_TRUE(info.createsProcessesExternally);

  Environment overridden = env;
  overridden.set("MASTER_ADDR", "10.1.1.1");
  overridden.set("MASTER_PORT", "2222");
  EXPECT_EQ(resolveClusterInfo(overridden, {4, 2}).masterAddr, "10.1.1.1");
  EXPECT_EQ(resolveClusterInfo(overridden, {4, 2}).masterPort, 2222);

  Environment interactive = env;
  interactive.set("SLURM_JOB_NAME", "bash");
  EXPECT_FALSE(makeSlurmEnvironment()->detect(interactive));

  EXPECT_EQ(envErrorOf({{"SLURM_NTASKS", "6"}, {"SLURM_PROCID", "0"}}, {4, 2}),
            "SLURM_NTASKS=6 disagrees with trainer.num_nodes=2 x trainer.devices=4 = 8 processes (SLURM_NTASKS counts "
            "processes, not nodes); launch with srun --nodes=2 --ntasks-per-node=4");
}

// The sbatch script docs/distributed.md shows: every task srun starts for
// its #SBATCH layout resolves to its own rank of one job, meeting at the
// first node, and the trainer flags it passes make the world size SLURM's.
TEST(ClusterEnvironments, TheShippedSbatchScriptMakesOneJobOfItsTasks) {
  std::ifstream in(HPU_SOURCE_DIR "/examples/slurm/train.sbatch");
  ASSERT_TRUE(in) << "examples/slurm/train.sbatch";
  int nodes = 0, per_node = 0;
  std::string srun;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, std::regex("#SBATCH --nodes=([0-9]+)"))) nodes = std::stoi(m[1]);
    if (std::regex_match(line, m, std::regex("#SBATCH --ntasks-per-node=([0-9]+)"))) per_node = std::stoi(m[1]);
    if (line.rfind("srun ", 0) == 0 || !srun.empty()) srun += line + "\n";
  }
  ASSERT_GT(nodes, 1);
  ASSERT_GT(per_node, 0);
  EXPECT_THAT(srun, HasSubstr("--trainer.num_nodes=\"$SLURM_JOB_NUM_NODES\""));
  EXPECT_THAT(srun, HasSubstr("--trainer.devices=\"$SLURM_NTASKS_PER_NODE\""));
  const Topology topology{per_node, nodes};  // what those flags give
  std::set<int> ranks;
  for (int task = 0; task < nodes * per_node; ++task) {
    const Environment env{{"SLURM_NTASKS", std::to_string(nodes * per_node)},
                          {"SLURM_PROCID", std::to_string(task)},
                          {"SLURM_LOCALID", std::to_string(task % per_node)},
                          {"SLURM_NODEID", std::to_string(task / per_node)},
                          {"SLURM_JOB_NUM_NODES", std::to_string(nodes)},
                          {"SLURM_NTASKS_PER_NODE", std::to_string(per_node)},
                          {"SLURM_JOB_ID", "4242"},
                          {"SLURM_JOB_NODELIST", "gaudi[01-" + std::to_string(nodes < 10 ? nodes : 9) + "]"}};
    const ClusterInfo info = resolveClusterInfo(env, topology);
    EXPECT_EQ(info.environment, "SLURMEnvironment");
    EXPECT_EQ(info.worldSize, nodes * per_node);
    EXPECT_EQ(info.localRank, task % per_node);
    EXPECT_EQ(info.nodeRank, task / per_node);
    EXPECT_EQ(info.masterAddr, "gaudi01");
    EXPECT_EQ(info.masterPort, 15000 + 4242);
    EXPECT_TRUE(info.createsProcessesExternally);
    ranks.insert(info.globalRank);
  }
  EXPECT_EQ(static_cast<int>(ranks.size()), nodes * per_node);
  EXPECT_EQ(*ranks.begin(), 0);
  EXPECT_EQ(*ranks.rbegin(), nodes * per_node - 1);
}

TEST(ClusterEnvironments, OpenMpi) {
  const Environment env{{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                   {"MASTER_ADDR", "n0"},          {"MASTER_PORT", "4000"}};
  const ClusterInfo info = resolveClusterInfo(env, {2, 2});
  EXPECT_EQ(info.environment, "MPIEnvironment");
  EXPECT_EQ(info.globalRank, 3);
  EXPECT_EQ(info.nodeRank, 1);
  EXPECT_EQ(info.localRank, 1);
  Environment noPort = env;
  noPort.unset("MASTER_PORT");
  EXPECT_EQ(envErrorOf(noPort, {2, 2}), "MASTER_PORT is not set; MPIEnvironment needs the same free port on every "
                                        "process");
  Environment cyclic = env;
  cyclic.set("OMPI_COMM_WORLD_LOCAL_RANK", "0");
  EXPECT_THAT(envErrorOf(cyclic, {2, 2}), HasSubstr("OMPI_COMM_WORLD_LOCAL_RANK=0 with OMPI_COMM_WORLD_RANK=3 and "
                                                    "trainer.devices=2 is not a by-node placement (expected local "
                                                    "rank 1)"));
}

TEST(ClusterEnvironments, TorchElastic) {
  const Environment env{{"RANK", "2"},          {"LOCAL_RANK", "0"},          {"WORLD_SIZE", "4"},
                   {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29400"}};
  const ClusterInfo info = resolveClusterInfo(env, {2, 2});
  EXPECT_EQ(info.environment, "TorchElasticEnvironment");
  EXPECT_EQ(info.globalRank, 2);
  EXPECT_EQ(info.nodeRank, 1);
  EXPECT_TRUE(info.createsProcessesExternally);
  Environment wrongLocal = env;
  wrongLocal.set("LOCAL_WORLD_SIZE", "4");
  EXPECT_EQ(envErrorOf(wrongLocal, {2, 2}),
            "LOCAL_WORLD_SIZE=4 disagrees with trainer.devices=2; launch with torchrun --nproc_per_node=2");
}

TEST(ClusterEnvironments, DetectionFollowsTheDocumentedOrder) {
  // torchrun also sets GROUP_RANK: the explicit environment, tried first, wins.
  const Environment torchrun{{"RANK", "1"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "2"}, {"GROUP_RANK", "0"},
                        {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1"}};
  EXPECT_EQ(detectClusterEnvironment(torchrun)->name(), "LightningEnvironment");
  EXPECT_EQ(resolveClusterInfo(torchrun, {2, 1}).globalRank, 1);
  const Environment slurmAndMpi{{"SLURM_NTASKS", "1"}, {"SLURM_PROCID", "0"}, {"OMPI_COMM_WORLD_RANK", "0"},
                           {"OMPI_COMM_WORLD_SIZE", "1"}};
  EXPECT_EQ(detectClusterEnvironment(slurmAndMpi)->name(), "SLURMEnvironment");
  const Environment mpiAndElastic{{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}, {"RANK", "0"},
                             {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "1"}};
  EXPECT_EQ(detectClusterEnvironment(mpiAndElastic)->name(), "MPIEnvironment");
}

struct InvalidCase {
  Environment env;
  Topology topology;
  std::string message;
};

class InvalidValues : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(InvalidValues, RaiseEnvErrorNamingTheVariableAndValue) {
  EXPECT_EQ(envErrorOf(GetParam().env, GetParam().topology), GetParam().message);
}

const Environment kNode{{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}};

Environment with(Environment env, const std::string& name, const std::string& value) {
  env.set(name, value);
  return env;
}

INSTANTIATE_TEST_SUITE_P(
    AllEnvironments, InvalidValues,
    ::testing::Values(
        InvalidCase{with(kNode, "NODE_RANK", "abc"), {8, 2}, "NODE_RANK='abc' is not a non-negative integer"},
        InvalidCase{with(kNode, "NODE_RANK", "-1"), {8, 2}, "NODE_RANK=-1 is negative; it must be 0 or more"},
        InvalidCase{with(kNode, "NODE_RANK", "1x"), {8, 2}, "NODE_RANK='1x' is not a non-negative integer"},
        InvalidCase{with(kNode, "NODE_RANK", "99999999999"), {8, 2}, "NODE_RANK=99999999999 is too large"},
        InvalidCase{with(kNode, "NODE_RANK", "2"), {8, 2},
                    "NODE_RANK=2 is out of range for trainer.num_nodes=2; valid values are 0..1"},
        InvalidCase{with(with(kNode, "NODE_RANK", "0"), "LOCAL_RANK", "8"), {8, 2},
                    "LOCAL_RANK=8 is out of range for trainer.devices=8; valid values are 0..7"},
        InvalidCase{with(with(kNode, "NODE_RANK", "0"), "WORLD_SIZE", "8"), {8, 2},
                    "WORLD_SIZE=8 disagrees with trainer.num_nodes=2 x trainer.devices=8 = 16 processes (WORLD_SIZE "
                    "counts processes, not nodes); for 8 processes set trainer.num_nodes=1"},
        InvalidCase{with(with(kNode, "NODE_RANK", "0"), "MASTER_PORT", "70000"), {8, 2},
                    "MASTER_PORT='70000' is not a TCP port; use a free port in 1..65535"},
        InvalidCase{with(with(kNode, "NODE_RANK", "0"), "MASTER_PORT", "http"), {8, 2},
                    "MASTER_PORT='http' is not a TCP port; use a free port in 1..65535"},
        InvalidCase{with(with(kNode, "NODE_RANK", "0"), "MASTER_PORT", "0"), {8, 2},
                    "MASTER_PORT='0' is not a TCP port; use a free port in 1..65535"},
        InvalidCase{with(with(kNode, "NODE_RANK", "0"), "MASTER_ADDR", ""), {8, 2}, "MASTER_ADDR is set but empty"},
        InvalidCase{Environment{{"NODE_RANK", "1"}, {"MASTER_PORT", "29500"}}, {8, 2},
                    "MASTER_ADDR is not set but trainer.num_nodes=2; set it on every node to the address of the node "
                    "with NODE_RANK=0 (rank 0 listens on exactly that address)"},
        InvalidCase{Environment{{"NODE_RANK", "1"}, {"MASTER_ADDR", "h"}}, {8, 2},
                    "MASTER_PORT is not set but 16 processes were started separately; set the same free port on every "
                    "node"},
        InvalidCase{Environment{{"SLURM_NTASKS", "8"}, {"SLURM_PROCID", "8"}, {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "0"},
                           {"SLURM_JOB_NODELIST", "n1"}, {"SLURM_JOB_ID", "7"}},
                    {4, 2}, "SLURM_PROCID=8 is out of range for SLURM_NTASKS=8; valid values are 0..7"},
        InvalidCase{Environment{{"SLURM_NTASKS", "8"}, {"SLURM_PROCID", "1"}, {"SLURM_NODEID", "0"}}, {4, 2},
                    "SLURM_LOCALID is not set; SLURMEnvironment needs it"},
        InvalidCase{Environment{{"SLURM_NTASKS", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "0"},
                           {"SLURM_JOB_NODELIST", "node[01-"}, {"SLURM_JOB_ID", "7"}},
                    {2, 1},
                    "SLURM_JOB_NODELIST='node[01-' has an unclosed '['; expected a host list like node[01-04,07],login1"},
        InvalidCase{Environment{{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "4"}}, {2, 2},
                    "OMPI_COMM_WORLD_RANK=5 is out of range for OMPI_COMM_WORLD_SIZE=4; valid values are 0..3"},
        InvalidCase{Environment{{"RANK", "0"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "x"}}, {1, 1},
                    "WORLD_SIZE='x' is not a non-negative integer"}));

TEST(SlurmNodeList, FirstHostKeepsPaddingAndTakesFirstOfEveryRange) {
  EXPECT_EQ(firstHostOfNodeList("node[01-04,07]"), "node01");
  EXPECT_EQ(firstHostOfNodeList("node[07,01-04]"), "node07");
  EXPECT_EQ(firstHostOfNodeList("login1,node[1-2]"), "login1");
  EXPECT_EQ(firstHostOfNodeList("rack[2-3]-n[005-006]"), "rack2-n005");
  EXPECT_EQ(firstHostOfNodeList("single"), "single");
  EXPECT_EQ(firstHostOfNodeList("a[9]"), "a9");
}

TEST(SlurmNodeList, MalformedListsNameTheVariable) {
  auto message = [](std::string_view list) {
    try {
      firstHostOfNodeList(list);
    } catch (const EnvError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(""), "SLURM_JOB_NODELIST='' is empty; expected a host list like node[01-04,07],login1");
  EXPECT_THAT(message("node[04-01]"), HasSubstr("has a descending range 04-01"));
  EXPECT_THAT(message("node01]"), HasSubstr("has ']' without '[' at offset 6"));
  EXPECT_THAT(message("node[a]"), HasSubstr("needs a number at offset 5"));
  EXPECT_THAT(message("a,,b"), HasSubstr("has an empty host name at offset 2"));
  EXPECT_THAT(message("a,"), HasSubstr("ends with ','"));
  EXPECT_THAT(message("n[1-2"), HasSubstr("has an unclosed '['"));
}

}  // namespace
}  // namespace hpu::comm
