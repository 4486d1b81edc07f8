// scripts/local-cluster.sh: K "nodes" on this machine, each started as on a
// real cluster (MASTER_ADDR, MASTER_PORT, NODE_RANK, WORLD_SIZE), meet in one
// rendezvous, train in the caller's directory, and the script exits with the
// first failing node's code. Loopback only; every run has a hard deadline.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <spdlog/fmt/fmt.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <regex>

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

// GPT-2 with dropout, its layers split over two nodes: each node's rank
// draws the whole initial parameters and the dropout masks from the job's
// seed and keeps its part, so two ranks with different seeds train another
// model than one seed gives.
constexpr const char* kSplitGpt2 = R"(trainer:
  devices: 1
  max_steps: 3
  log_every_n_steps: 1
  enable_progress_bar: false
  enable_model_summary: false
  enable_checkpointing: false
  strategy: ModelParallelStrategy
  logger:
    class_path: CSVLogger
    init_args: {version: 0}
model:
  class_path: GPT2LMHeadModel
  init_args: {vocab_size: 64, n_embd: 32, n_layer: 1, n_head: 4, n_positions: 16}
data:
  class_path: RandomTokensDataModule
  init_args: {vocab_size: 64, block_size: 8, num_samples: 16, batch_size: 2}
)";

TEST_F(LocalClusterTest, AnUnsetSeedIsRankZerosForTheWholeJob) {
  env()["HPU_LOG_LEVEL"] = "info";
  write("gpt2.yaml", kSplitGpt2);  // no seed_everything: Lightning's default, true
  const auto fit = [&](const std::string& root, std::vector<std::string> more) {
    std::vector<std::string> args{"--bin", trainBinary(), "--nodes", "2", "--devices", "1", "--", "fit",
                                  "--config", "gpt2.yaml", "--trainer.default_root_dir=" + root};
    args.insert(args.end(), more.begin(), more.end());
    return runScript("local-cluster.sh", args);
  };
  const RunResult drawn = fit("drawn", {});
  ASSERT_EQ(drawn.exit_code, 0) << drawn.describe();
  // Printed once, by rank 0, and saved in the run's config.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(drawn.out, m, std::regex(R"(\[node 0\] \[rank 0\] info: Seed set to ([0-9]+)\n)")))
      << drawn.out;
  const std::string seed = m[1];
  EXPECT_EQ(drawn.out.find("Seed set to", drawn.out.find("Seed set to") + 1), std::string::npos) << drawn.out;
  EXPECT_EQ(YAML::LoadFile((dir() / "drawn/lightning_logs/version_0/config.yaml").string())["seed_everything"].as<std::string>(),
            seed);
  // Both ranks trained with that seed: the same losses as a job given it.
  const RunResult given = fit("given", {"--seed_everything=" + seed});
  ASSERT_EQ(given.exit_code, 0) << given.describe();
  const auto losses = [&](const std::string& root) {
    std::vector<std::string> out;
    for (const std::string& cell : readCsv(dir() / root / "lightning_logs/version_0/metrics.csv").column("train_loss"))
      if (!cell.empty()) out.push_back(cell);
    return out;
  };
  EXPECT_EQ(losses("drawn"), losses("given"));
  EXPECT_EQ(losses("drawn").size(), 3u);
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

// trainer.dry_run: 4 nodes of 2 ranks wire the launch on shape-only
// devices; each node reports its ranks, rank 0 the job, and nothing is
// written.
TEST_F(LocalClusterTest, ADryRunWiresEveryRankAndWritesNothing) {
  env()["HPU_LOG_LEVEL"] = "info";
  const RunResult r = runScript("local-cluster.sh", {"--bin", trainBinary(), "--nodes", "4", "--devices", "2", "--",
                                                     "fit", "--config", boringConfig(), "--trainer.dry_run=true",
                                                     "--trainer.strategy=hpu_deepspeed_stage_3"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (int node = 0; node < 4; ++node) {
    EXPECT_THAT(r.out, ::testing::ContainsRegex(fmt::format(
                           "\\[node {0}\\] \\[rank {1}\\] info: dry run: node {0} \\([^)]*\\): ranks {1}-{2} on "
                           "hpu:0-1 \\(Intel Gaudi 2, shape-only\\): peak device memory [0-9.]+ [KMG]?i?B of 96 GiB; "
                           "[0-9]+ collectives per rank in up to 1 process groups agreed; checkpoint files: ",
                           node, 2 * node, 2 * node + 1)))
        << r.out;
  }
  // ZeRO-3: rank 0's file, and each rank's optimizer shard.
  EXPECT_THAT(r.out, HasSubstr("[node 2] [rank 4] info: dry run: node 2 (") );
  EXPECT_THAT(r.out, HasSubstr("checkpoint files: 2 files, epoch=0-step=1.ckpt.rank4 .. epoch=0-step=1.ckpt.rank5"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex(
                         "\\[node 0\\] \\[rank 0\\] info: dry run: 8 ranks on 4 node\\(s\\) wired in [0-9.]+ s .*"
                         "HPUDeepSpeedStrategy: peak device memory .* every process group's ranks issued the same "
                         "collectives \\([0-9]+ per rank\\); the first checkpoint, "
                         "\\./lightning_logs/version_0/checkpoints/epoch=0-step=1\\.ckpt, would be 9 file\\(s\\); "
                         "nothing was written"));
  EXPECT_FALSE(std::filesystem::exists(dir() / "lightning_logs"));
}

// Pipeline stages wire too: every pair of neighbouring stages, the job's
// group and the pipeline's share their two ranks, and their collectives are
// checked group by group (with two interleaved stages in a ring, both links
// join the same two ranks).
TEST_F(LocalClusterTest, ADryRunOfPipelineStagesChecksEachGroupOfTheSameRanksApart) {
  env()["HPU_LOG_LEVEL"] = "info";
  for (const std::string virtual_stages : {"1", "2"}) {
    SCOPED_TRACE("virtual_pipeline_size=" + virtual_stages);
    const RunResult r = runScript(
        "local-cluster.sh",
        {"--bin", trainBinary(), "--nodes", "2", "--devices", "2", "--", "fit", "--config",
         HPU_SOURCE_DIR "/configs/llama_tiny_text.yaml", "--trainer.dry_run=true",
         "--trainer.strategy=ModelParallelStrategy", "--trainer.strategy.init_args.pipeline_parallel_size=2",
         "--trainer.strategy.init_args.tensor_parallel_size=1",
         "--trainer.strategy.init_args.virtual_pipeline_size=" + virtual_stages, "--trainer.accumulate_grad_batches=2"});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_THAT(r.out, HasSubstr("every process group's ranks issued the same collectives")) << r.out;
  }
}

// A node started otherwise than the others, through a stand-in for
// hpu-train that changes node 2's (or 3's) start and runs the real one.
class DryRunWiringFaultTest : public LocalClusterTest {
 protected:
  RunResult launch(const std::string& change) {
    write("node.sh", "#!/bin/sh\n" + change + "\nexec '" + trainBinary() + "' \"$@\"\n");
    std::filesystem::permissions(dir() / "node.sh", std::filesystem::perms::owner_all);
    env()["HPU_RENDEZVOUS_TIMEOUT"] = "3s";
    return runScript("local-cluster.sh", {"--bin", (dir() / "node.sh").string(), "--nodes", "4", "--devices", "2",
                                          "--", "fit", "--config", boringConfig(), "--trainer.dry_run=true"},
                     std::chrono::milliseconds(30000));
  }
};

TEST_F(DryRunWiringFaultTest, ANodeWithAnotherConfig) {
  const RunResult r = launch("[ \"$NODE_RANK\" = 2 ] && set -- \"$@\" --trainer.accumulate_grad_batches=2");
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_THAT(r.out, ::testing::ContainsRegex(
                         "rank [45]: config differs from rank 0 at trainer.accumulate_grad_batches: 2 vs 1"));
}

TEST_F(DryRunWiringFaultTest, AWrongWorldSize) {
  const RunResult r = launch("[ \"$NODE_RANK\" = 2 ] && export WORLD_SIZE=6");
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("[node 2] error: WORLD_SIZE=6 disagrees with trainer.num_nodes=4 x trainer.devices=2 = "
                               "8 processes (WORLD_SIZE counts processes, not nodes); for 6 processes set "
                               "trainer.num_nodes=3"));
}

TEST_F(DryRunWiringFaultTest, AMissingNode) {
  const RunResult r = launch("[ \"$NODE_RANK\" = 3 ] && exit 0");
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_THAT(r.out, ::testing::ContainsRegex("rendezvous on 127\\.0\\.0\\.1:[0-9]+ timed out after 3s: 6/8 ranks "
                                              "joined, missing: 6,7; start every node with the same MASTER_ADDR"));
}

TEST_F(DryRunWiringFaultTest, ADuplicateNodeRank) {
  const RunResult r = launch("[ \"$NODE_RANK\" = 3 ] && export NODE_RANK=2");
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_THAT(r.out, ::testing::ContainsRegex(
                         "rank [45] joined twice: pid [0-9]+ on [^ ]+ \\(node 2, local rank [01]\\) and pid [0-9]+ on "
                         "[^ ]+ \\(node 2, local rank [01]\\); every node needs its own NODE_RANK"));
}

TEST_F(LocalClusterTest, RefusesAnUnknownOption) {
  const RunResult r = runScript("local-cluster.sh", {"--gpus", "2", "--", "fit"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("local-cluster.sh: unknown option '--gpus'"));
}

}  // namespace
}  // namespace hpu::cli::testing
