// hpu-train estimate plan: the layouts it extrapolates are priced as
// estimate fit prices them whole, the winner it writes is a config that
// estimate fit gives the same figure for and that fit runs in the memory it
// said, and bad input stops with exit 2 and writes nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>

#include "train_support.h"

namespace hpu::cli::testing {
namespace {

using ::testing::HasSubstr;

// A Llama of 6 layers on 4 cards, global batch 32 (micro 2 x 4 x 4 replicas).
constexpr const char* kTiny = R"(trainer:
  accelerator: hpu
  devices: 4
  strategy:
    class_path: ModelParallelStrategy
    init_args: {data_parallel_size: 4, tensor_parallel_size: 1}
  precision: bf16-mixed
  accumulate_grad_batches: 4
  max_steps: 2
  limit_val_batches: 0
  enable_checkpointing: false
  enable_progress_bar: false
  enable_model_summary: false
seed_everything: 1
model:
  class_path: LlamaForCausalLM
  init_args: {hidden_size: 64, intermediate_size: 128, num_hidden_layers: 6, num_attention_heads: 4,
              num_key_value_heads: 2, max_position_embeddings: 64, vocab_size: 128}
data:
  class_path: RandomTokensDataModule
  init_args: {vocab_size: 128, block_size: 32, batch_size: 2, num_samples: 256}
)";

class EstimatePlan : public TrainRunTest {
 protected:
  void SetUp() override { write("tiny.yaml", kTiny); }
  nlohmann::json plan(std::vector<std::string> more = {}) {
    std::vector<std::string> args{"estimate", "plan", "-c", "tiny.yaml", "--json", "plan.json"};
    args.insert(args.end(), more.begin(), more.end());
    const RunResult r = run(args);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    return nlohmann::json::parse(read("plan.json"));
  }
  // The table's row of `layout`, or null.
  static const nlohmann::json* rowOf(const nlohmann::json& p, const std::string& layout) {
    const auto it = std::find_if(p["plans"].begin(), p["plans"].end(),
                                 [&](const nlohmann::json& row) { return row["layout"] == layout; });
    return it == p["plans"].end() ? nullptr : &*it;
  }
  // tiny.yaml with `row`'s layout set, as command-line arguments.
  static std::vector<std::string> argsOf(const nlohmann::json& row) {
    std::vector<std::string> args{"-c", "tiny.yaml"};
    for (const auto& [key, value] : row["config_overrides"].items())
      args.push_back("--" + key + "=" + value.get<std::string>());
    return args;
  }
  nlohmann::json estimateFit(std::vector<std::string> args) {
    args.insert(args.begin(), {"estimate", "fit", "--json", "fit.json"});
    const RunResult r = run(args);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    return nlohmann::json::parse(read("fit.json"));
  }
  // Expects `layout`'s row of `p` extrapolated and priced as estimate fit
  // prices its whole job: the same throughput, the peak within 1%. Returns
  // the row (null if there is none) and estimate fit's report.
  std::pair<const nlohmann::json*, nlohmann::json> expectPricedAsWhole(const nlohmann::json& p,
                                                                      const std::string& layout) {
    const nlohmann::json* row = rowOf(p, layout);
    if (row == nullptr) {
      ADD_FAILURE() << "no row " << layout;
      return {nullptr, {}};
    }
    EXPECT_FALSE((*row)["priced_whole"].get<bool>());
    nlohmann::json e = estimateFit(argsOf(*row));
    EXPECT_NEAR((*row)["tokens_per_s"].get<double>() / e["tokens_per_s"].get<double>(), 1.0, 1e-9);
    EXPECT_NEAR((*row)["peak_device_memory_bytes"].get<double>() / e["peak_device_memory_bytes"].get<double>(), 1.0,
                0.01);
    return {row, std::move(e)};
  }
};

// One of each kind of layout the search extrapolates (pipeline stages,
// tensor parallelism with SP, DeepSpeed ZeRO-3, accumulation) is priced as a
// trace of its whole job prices it: the same throughput, the peak within 1%.
TEST_F(EstimatePlan, ExtrapolatedLayoutsAreEstimateFitsFigures) {
  const nlohmann::json p = plan({"--whole=1"});
  EXPECT_EQ(p["global_batch"], 32);
  EXPECT_EQ(p["candidates"], 210);
  int fits = 0;
  for (const char* wanted : {"TP1 PP2 DP2 ZeRO-1, micro 2 x 8, recompute selective",
                             "TP2 PP1 DP2 ZeRO-1 SP, micro 4 x 4, recompute full",
                             "TP1 PP1 DP4 ZeRO-3, micro 1 x 8, recompute none",
                             "TP2 PP2 DP1 ZeRO-0, micro 2 x 16, recompute none"}) {
    SCOPED_TRACE(wanted);
    const auto [it, e] = expectPricedAsWhole(p, wanted);
    ASSERT_NE(it, nullptr);
    // Only stages wait for point-to-point transfers.
    EXPECT_EQ((*it)["pipeline_transfers_s"].get<double>() > 0, (*it)["pipeline_stages"].get<int>() > 1);
    // Layouts without stages run with fit: rank 0's MaxInUse is the peak estimate fit gives.
    if ((*it)["pipeline_stages"].get<int>() > 1) continue;
    const std::string version = "lightning_logs/version_" + std::to_string(fits++);
    std::vector<std::string> args = argsOf(*it);
    args.insert(args.begin(), "fit");
    args.insert(args.end(), {"--trainer.callbacks=[DeviceStatsMonitor]", "--trainer.log_every_n_steps=1"});
    const RunResult f = run(args);
    ASSERT_EQ(f.exit_code, 0) << f.describe();
    EXPECT_EQ(readCsv(dir() / version / "metrics.csv").valueAt("DeviceStatsMonitor.on_train_batch_end/MaxInUse", 1),
              e["peak_device_memory_bytes"].get<double>());
  }
}

// With a vocabulary of 4,096 rows (the embeddings weigh seven of these
// layers) the model splits its 8 layers unevenly over stages (1, 3, 3, 1
// over 4); the reduced traces give every stage the same layers, so each
// traced rank is extrapolated to its own stages' layers: the same
// throughput and peak as the whole job traced, and the model's parameters.
TEST_F(EstimatePlan, StagesThatALargeVocabularyUnbalancesAreExtrapolatedAsSplit) {
  std::string config = kTiny;
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"num_hidden_layers: 6", "num_hidden_layers: 8"},
                                 {"vocab_size: 128}", "vocab_size: 4096}"},
                                 {"vocab_size: 128,", "vocab_size: 4096,"}}) {
    const auto at = config.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    config.replace(at, from.size(), to);
  }
  write("tiny.yaml", config);
  const nlohmann::json p = plan({"--whole=1"});
  EXPECT_EQ(p["model"], "LlamaForCausalLM, 8 layers, 0.82M parameters");
  for (const char* wanted : {"TP1 PP4 DP1 ZeRO-0, micro 2 x 16, recompute none",
                             "TP1 PP2 DP2 ZeRO-1, micro 1 x 16, recompute selective"}) {
    SCOPED_TRACE(wanted);
    expectPricedAsWhole(p, wanted);
  }
}

// Interleaved 1F1B priced from the config that sets it: 2 stages of 3
// layers in 3 chunks a stage wait a third of the bubble of 2 stages without,
// and the stages' transfers grow (every chunk passes its activations on).
TEST_F(EstimatePlan, InterleavedStagesShrinkTheBubbleAndAddTransfers) {
  const std::vector<std::string> pp2{"-c", "tiny.yaml", "--trainer.strategy.init_args.data_parallel_size=2",
                                     "--trainer.strategy.init_args.pipeline_parallel_size=2"};
  const nlohmann::json plain = estimateFit(pp2);
  std::vector<std::string> interleaved = pp2;
  interleaved.push_back("--trainer.strategy.init_args.virtual_pipeline_size=3");
  const nlohmann::json vp3 = estimateFit(interleaved);
  EXPECT_EQ(plain["pipeline"]["virtual_stages"], 1);
  EXPECT_EQ(vp3["pipeline"]["virtual_stages"], 3);
  const double bubble = plain["breakdown"]["pipeline_bubble_s"].get<double>();
  ASSERT_GT(bubble, 0);
  EXPECT_NEAR(vp3["breakdown"]["pipeline_bubble_s"].get<double>() / bubble, 1.0 / 3, 0.02);
  EXPECT_GT(vp3["pipeline"]["transfers_s"].get<double>(), plain["pipeline"]["transfers_s"].get<double>());
}

// A config that interleaves its stages is ranked as it is, priced whole:
// 2 stages of 3 layers in 3 chunks each, by virtual_pipeline_size or by
// layers_per_virtual_stage.
TEST_F(EstimatePlan, TheConfigsInterleavedLayoutIsRankedAsItRuns) {
  for (const char* chunks : {"virtual_pipeline_size=3", "layers_per_virtual_stage=1"}) {
    SCOPED_TRACE(chunks);
    const std::vector<std::string> config{"--trainer.strategy.init_args.data_parallel_size=2",
                                          "--trainer.strategy.init_args.pipeline_parallel_size=2",
                                          std::string("--trainer.strategy.init_args.") + chunks};
    nlohmann::json p = plan(config);
    const std::string layout = "TP1 PP2 VP3 DP2 ZeRO-0, micro 2 x 4, recompute none";
    EXPECT_EQ(p["given"]["layout"], layout);
    const nlohmann::json* row = rowOf(p, layout);
    ASSERT_NE(row, nullptr);
    EXPECT_TRUE((*row)["priced_whole"].get<bool>());
    EXPECT_EQ(p["plans"][p["given_rank"].get<int>() - 1]["layout"], layout);
    std::vector<std::string> args{"-c", "tiny.yaml"};
    args.insert(args.end(), config.begin(), config.end());
    EXPECT_EQ((*row)["tokens_per_s"].get<double>(), estimateFit(args)["tokens_per_s"].get<double>());
  }
}

// Under a limit the config's own layout exceeds, the winner written with -o
// is a config estimate fit gives the same figure for, and fit runs it at the
// peak the plan said.
TEST_F(EstimatePlan, WinnerConfigRunsAsPlanned) {
  env()["HPU_EMULATOR_MEMORY_LIMIT"] = "3 MiB";
  const RunResult r = run({"estimate", "plan", "-c", "tiny.yaml", "--json", "plan.json", "-o", "plan.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("the config's own layout (TP1 PP1 DP4 ZeRO-0, micro 2 x 4, recompute none) does not "
                               "fit"));
  const nlohmann::json p = nlohmann::json::parse(read("plan.json"));
  const nlohmann::json& best = p["plans"][0];
  EXPECT_EQ(best["layout"], "TP1 PP1 DP4 ZeRO-2, micro 8 x 1, recompute full");
  EXPECT_TRUE(best["priced_whole"].get<bool>());
  for (const nlohmann::json& row : p["plans"]) EXPECT_LE(row["peak_device_memory_bytes"].get<double>(), 3 << 20);
  for (const nlohmann::json& row : p["not_fitting"]) EXPECT_GT(row["peak_device_memory_bytes"].get<double>(), 3 << 20);

  const nlohmann::json e = estimateFit({"-c", "plan.yaml"});
  EXPECT_EQ(e["tokens_per_s"].get<double>(), best["tokens_per_s"].get<double>());
  EXPECT_EQ(e["peak_device_memory_bytes"].get<double>(), best["peak_device_memory_bytes"].get<double>());

  const RunResult f = run({"fit", "-c", "plan.yaml", "--trainer.callbacks=[DeviceStatsMonitor]",
                           "--trainer.log_every_n_steps=1"});
  ASSERT_EQ(f.exit_code, 0) << f.describe();
  EXPECT_EQ(readCsv(dir() / "lightning_logs/version_0/metrics.csv")
                .valueAt("DeviceStatsMonitor.on_train_batch_end/MaxInUse", 1),
            best["peak_device_memory_bytes"].get<double>());
}

// Llama 2 70B on 64 Gaudi 2: interleaving the best plain layout's 4 stages
// over 2 virtual stages each wins; every number of virtual stages that
// promised more than that layout was priced whole (4 and 5: slower traced
// whole); -o writes the virtual size, and estimate fit gives that config the
// plan's figure.
TEST_F(EstimatePlan, AnInterleavedWinnerIsWrittenWithItsVirtualStages) {
  const RunResult r = run({"estimate", "plan", "-c", HPU_SOURCE_DIR "/configs/estimate/llama2_70b_train_64x_gaudi2.yaml",
                           "--json", "plan.json", "-o", "plan.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json p = nlohmann::json::parse(read("plan.json"));
  const nlohmann::json& best = p["plans"][0];
  EXPECT_EQ(best["layout"], "TP4 PP4 VP2 DP4 ZeRO-1 SP, micro 1 x 128, recompute none");
  const nlohmann::json* plain = rowOf(p, "TP4 PP4 DP4 ZeRO-1 SP, micro 1 x 128, recompute none");
  ASSERT_NE(plain, nullptr);
  ASSERT_EQ(p["first_interleaved"].size(), 3u);
  for (const nlohmann::json& way : p["first_interleaved"]) {
    const int v = way["virtual_stages"].get<int>();
    SCOPED_TRACE(v);
    ASSERT_GT(way["tokens_per_s"].get<double>(), (*plain)["tokens_per_s"].get<double>());
    const nlohmann::json* row = rowOf(p, fmt::format("TP4 PP4 VP{} DP4 ZeRO-1 SP, micro 1 x 128, recompute none", v));
    ASSERT_NE(row, nullptr);
    EXPECT_TRUE((*row)["priced_whole"].get<bool>());
  }
  EXPECT_THAT(read("plan.yaml"), HasSubstr("virtual_pipeline_size: 2"));
  const nlohmann::json e = estimateFit({"-c", "plan.yaml"});
  EXPECT_EQ(e["pipeline"]["virtual_stages"], 2);
  EXPECT_EQ(e["tokens_per_s"].get<double>(), best["tokens_per_s"].get<double>());
}

// A vocabulary no tensor-parallel size divides (127 tokens) prunes no layout:
// each is padded as Megatron-LM pads it (128 x its tensor-parallel size), so
// the search covers the 210 layouts of the 128-token model, and a TP2 layout
// is priced with its padded embedding and head (256 rows each), as estimate
// fit prices it.
TEST_F(EstimatePlan, AnOddVocabularyPrunesNoLayout) {
  const std::vector<std::string> odd{"--model.init_args.vocab_size=127", "--data.init_args.vocab_size=127"};
  const nlohmann::json p = plan(odd);
  EXPECT_EQ(p["candidates"], 210);
  const auto tp2 = std::find_if(p["plans"].begin(), p["plans"].end(), [](const nlohmann::json& row) {
    return row["layout"] == "TP2 PP1 DP2 ZeRO-1 SP, micro 4 x 4, recompute full";
  });
  ASSERT_NE(tp2, p["plans"].end());
  std::vector<std::string> args{"-c", "tiny.yaml"};
  args.insert(args.end(), odd.begin(), odd.end());
  for (const auto& [key, value] : (*tp2)["config_overrides"].items())
    args.push_back("--" + key + "=" + value.get<std::string>());
  const nlohmann::json e = estimateFit(args);
  EXPECT_EQ(e["vocabulary_padding_params"], 2 * (256 - 127) * 64);
  EXPECT_NEAR((*tp2)["tokens_per_s"].get<double>() / e["tokens_per_s"].get<double>(), 1.0, 1e-9);
}

TEST_F(EstimatePlan, GlobalBatchNoLayoutDividesSaysWhichWould) {
  const RunResult r = run({"estimate", "plan", "-c", "tiny.yaml", "-o", "plan.yaml", "--data.init_args.batch_size=3",
                           "--trainer.accumulate_grad_batches=1", "--trainer.strategy.init_args.data_parallel_size=1",
                           "--trainer.strategy.init_args.tensor_parallel_size=4",
                           "--model.init_args.num_attention_heads=2", "--model.init_args.num_hidden_layers=1"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("estimate plan: a global batch of 3 sequences (micro 3 x accumulation 1 x 1 "
                               "data-parallel) divides across no layout of LlamaForCausalLM on 4 cards: its layouts "
                               "have 2, 4 data-parallel replicas; a global batch that one of them divides works, e.g. "
                               "2 or 4 (set data.init_args.batch_size and trainer.accumulate_grad_batches)"));
  EXPECT_FALSE(std::filesystem::exists(dir() / "plan.yaml"));
}

TEST_F(EstimatePlan, NothingFitsSaysWhichClusterWould) {
  env()["HPU_EMULATOR_MEMORY_LIMIT"] = "200 KiB";
  const RunResult r = run({"estimate", "plan", "-c", "tiny.yaml", "-o", "plan.yaml", "--json", "plan.json",
                           "--trainer.devices=1", "--trainer.strategy.init_args.data_parallel_size=1",
                           "--trainer.accumulate_grad_batches=16"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("no layout of LlamaForCausalLM, 6 layers, 0.24M parameters fits 1 x Intel Gaudi 2 at a "
                               "global batch of 32: the smallest peak is 3.9 MiB a card (TP1 PP1 DP1 ZeRO-0, micro 1 "
                               "x 32, recompute full) against 200.0 KiB; it fits on 1 node(s) x 8"));
  EXPECT_THAT(r.err, HasSubstr("set trainer.num_nodes=1 and trainer.devices=8"));
  EXPECT_FALSE(std::filesystem::exists(dir() / "plan.yaml"));
  EXPECT_FALSE(std::filesystem::exists(dir() / "plan.json"));
}

TEST_F(EstimatePlan, ItsOptionsBelongToPlan) {
  const RunResult o = run({"estimate", "fit", "-c", "tiny.yaml", "-o", "x.yaml"});
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.err, HasSubstr("estimate: --output belongs to estimate plan, not estimate fit"));
  const RunResult top = run({"estimate", "predict", "-c", "tiny.yaml", "--top", "3"});
  EXPECT_EQ(top.exit_code, 2);
  EXPECT_THAT(top.err, HasSubstr("estimate: --top belongs to estimate plan, not estimate predict"));
  EXPECT_FALSE(std::filesystem::exists(dir() / "x.yaml"));
  const RunResult steps = run({"estimate", "plan", "-c", "tiny.yaml", "--steps", "3"});
  EXPECT_EQ(steps.exit_code, 2);
  EXPECT_THAT(steps.err, HasSubstr("estimate: --steps belongs to estimate fit and predict, not plan"));
}

}  // namespace
}  // namespace hpu::cli::testing
