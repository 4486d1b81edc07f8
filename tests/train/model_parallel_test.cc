// Tensor, pipeline and expert parallelism through the real binary
// (ModelParallelStrategy, and HPUDeepSpeedStrategy's experts; local ranks on
// loopback): a language model split across 2 or 4 ranks (its layers, its
// stages, its experts) trains to the losses, weights and optimizer state
// one device reaches (same seed, same global batch), with dropout on;
// tensor x data parallel trains as data
// parallel does; a checkpoint written by one layout resumes in another and
// continues the run as if it had never stopped; the 1F1B schedule shows in
// the profiler's trace; layouts that cannot work are refused by name. Every
// run is loopback only and has a hard deadline.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "hpu/core/checkpoint/consolidate.h"
#include "train_support.h"

namespace hpu::cli::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Random tokens on one device by default, 10 steps, a step checkpoint and
// the last one.
constexpr const char* kRun = R"(seed_everything: 7
trainer:
  devices: 1
  max_steps: 10
  log_every_n_steps: 1
  enable_progress_bar: false
  enable_model_summary: false
  logger:
    class_path: CSVLogger
    init_args: {version: 0}
  callbacks:
    - class_path: ModelCheckpoint
      init_args: {every_n_train_steps: 5, save_last: true, save_top_k: -1}
data:
  class_path: RandomTokensDataModule
  init_args: {vocab_size: 64, block_size: 16, num_samples: 64}
)";

// A small Llama with grouped-query attention (4 query heads, 2 key/value
// heads). SGD keeps the update linear in the gradient, so summation-order
// differences stay at float rounding (Adam's first steps divide by |g| and
// magnify them on near-zero gradients: 1e-4 relative on a few weights after
// 6 steps).
constexpr const char* kLlama = R"(model:
  class_path: LlamaForCausalLM
  init_args:
    vocab_size: 64
    hidden_size: 32
    intermediate_size: 48
    num_hidden_layers: 2
    num_attention_heads: 4
    num_key_value_heads: 2
    max_position_embeddings: 32
optimizer:
  class_path: SGD
  init_args: {lr: 0.5, momentum: 0.9}
)";

// GPT-2 with its default dropout (0.1 on embeddings, attention and residual
// branches): masks must be the ones one device draws.
constexpr const char* kGpt2 = R"(model:
  class_path: GPT2LMHeadModel
  init_args: {vocab_size: 64, n_embd: 32, n_layer: 2, n_head: 4, n_positions: 32}
optimizer:
  class_path: AdamW
  init_args: {lr: 0.01}
)";

// Split layers sum their partial products in another order than one
// device's GEMM: losses and weights agree to float rounding (observed:
// losses equal to the last printed digit after 10 AdamW steps; weights
// within 1.6e-6 of one device's after 10 steps of SGD with lr 0.5 and
// momentum 0.9, which carry each step's rounding into the next).
constexpr double kRelTolerance = 1e-5;
constexpr double kAbsTolerance = 4e-6;

const std::vector<std::string> kTensorParallel{"--trainer.strategy=ModelParallelStrategy"};

// A layout the model cannot take is refused by the process the user started,
// with exit 2, before it starts any rank: no line comes from a rank (a
// distributed run names its rank on every line).
void expectRefusedBeforeRanksStart(const RunResult& r) {
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("[rank "))) << r.describe();
}

class ModelParallelTest : public TrainRunTest {
 protected:
  // Fits `config` into <scratch>/<root> with `args`; expects exit 0.
  void fit(const std::string& config, const std::string& root, std::vector<std::string> args) {
    args.insert(args.begin(), {"fit", "-c", config, "--trainer.default_root_dir=" + root});
    const RunResult r = run(args);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
  }
  std::vector<double> losses(const std::string& root) const {
    const CsvTable t = readCsv(dir() / root / "lightning_logs" / "version_0" / "metrics.csv");
    std::vector<double> out;
    for (const std::string& cell : t.column("train_loss"))
      if (!cell.empty()) out.push_back(std::stod(cell));
    return out;
  }
  fs::path checkpoint(const std::string& root, const std::string& name) const {
    return dir() / root / "lightning_logs" / "version_0" / "checkpoints" / name;
  }
};

void expectClose(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], kAbsTolerance + kRelTolerance * std::abs(want[i])) << what << " at step " << i;
}

// Every model.* and optimizer.* tensor of `got` equals `want`'s, shapes
// included (a tensor-parallel checkpoint holds whole tensors); at least
// `at_least` of them (the small Llama's weights and their momentum: 20).
void expectSameTensors(const core::checkpoint::Checkpoint& got, const core::checkpoint::Checkpoint& want,
                       int at_least = 20) {
  std::set<std::string> got_names, want_names;
  for (const auto& t : got.tensors) got_names.insert(t.name);
  for (const auto& t : want.tensors) want_names.insert(t.name);
  EXPECT_EQ(got_names, want_names);
  int compared = 0;
  for (const auto& w : want.tensors) {
    const auto* g = got.find(w.name);
    if (g == nullptr) continue;
    ++compared;
    ASSERT_EQ(g->shape, w.shape) << w.name;
    ASSERT_EQ(g->values.size(), w.values.size()) << w.name;
    for (std::size_t i = 0; i < w.values.size(); ++i)
      ASSERT_LE(std::abs(double(g->values[i]) - double(w.values[i])),
                kAbsTolerance + kRelTolerance * std::abs(double(w.values[i])))
          << w.name << "[" << i << "]: " << g->values[i] << " vs one device's " << w.values[i];
  }
  EXPECT_GE(compared, at_least) << "the model's weights and their momentum";
}

// `ckpt` with its optimizer state in `order`'s parameter order: each
// optimizer.<state>.0 cut into its parameters (kOptimizerParams names them)
// and put together again. An interleaved run's whole form lists its
// parameters stage by stage, one device's in the model's order; every
// layout reads either by name.
core::checkpoint::Checkpoint withOptimizerOrder(core::checkpoint::Checkpoint ckpt, const nlohmann::json& order) {
  const nlohmann::json mine = nlohmann::json::parse(ckpt.meta(core::checkpoint::kOptimizerParams));
  for (auto& t : ckpt.tensors) {
    if (!t.name.starts_with("optimizer.")) continue;
    std::map<std::string, std::vector<float>> by_name;
    std::size_t at = 0;
    for (const auto& name : mine) {
      const auto* param = ckpt.find(name.get<std::string>());
      EXPECT_NE(param, nullptr) << name;
      if (param == nullptr) return ckpt;
      by_name[name] = std::vector<float>(t.values.begin() + static_cast<std::ptrdiff_t>(at),
                                         t.values.begin() + static_cast<std::ptrdiff_t>(at + param->values.size()));
      at += param->values.size();
    }
    t.values.clear();
    for (const auto& name : order) t.values.insert(t.values.end(), by_name[name].begin(), by_name[name].end());
  }
  return ckpt;
}

// `a` followed by `b`.
std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(ModelParallelTest, LlamaSplitTwoWaysTrainsAsOneDevice) {
  write("llama.yaml", std::string(kRun) + kLlama);
  fit("llama.yaml", "one", {});
  fit("llama.yaml", "tp2",
      {"--trainer.devices=2", kTensorParallel[0], "--trainer.strategy.init_args.save_distributed_checkpoint=false"});
  expectClose(losses("tp2"), losses("one"), "train_loss");
  EXPECT_EQ(losses("one").size(), 10u);
  // The whole model and optimizer state, in one file, as one device saves it.
  EXPECT_FALSE(fs::exists(checkpoint("tp2", "last.ckpt.rank0")));
  expectSameTensors(readCheckpoint(checkpoint("tp2", "last.ckpt")), readCheckpoint(checkpoint("one", "last.ckpt")));
}

// Under bf16-mixed a row-parallel layer's partial products are each rounded
// to bfloat16 before the all-reduce sums them, where one device rounds the
// whole sum once: the losses, from the first step on (one device's weights,
// nothing updated yet), agree to bfloat16's rounding (2^-8 relative), not to
// float's. docs/distributed.md measures where AdamW takes that over 1000 steps.
TEST_F(ModelParallelTest, UnderBf16MixedSplitLayersAgreeToBf16Rounding) {
  write("llama.yaml", std::string(kRun) + kLlama);
  const std::vector<std::string> bf16{"--trainer.precision=bf16-mixed"};
  fit("llama.yaml", "one", bf16);
  fit("llama.yaml", "tp2", plus(bf16, {"--trainer.devices=2", kTensorParallel[0]}));
  const std::vector<double> one = losses("one"), tp2 = losses("tp2");
  ASSERT_EQ(tp2.size(), one.size());
  ASSERT_EQ(one.size(), 10u);
  double largest = 0;
  for (std::size_t i = 0; i < one.size(); ++i) {
    EXPECT_LE(std::abs(tp2[i] - one[i]), std::ldexp(std::abs(one[i]), -8)) << "step " << i;
    largest = std::max(largest, std::abs(tp2[i] - one[i]) / std::abs(one[i]));
  }
  // Beyond float rounding: the partial sums were rounded apart.
  EXPECT_GT(largest, kRelTolerance) << "bf16-mixed tensor parallelism matched one device to float rounding";
}

// Every family built like Llama, split across 2 ranks, trains as one device:
// Qwen2's q/k/v biases and tied embeddings, Gemma's (1 + weight) norms and
// scaled embeddings, Gemma 2's soft-capping and sliding-window layers,
// Phi-3's fused projections (split in blocks), Mixtral's experts (each split
// as a dense MLP, the router replicated) with its load-balancing loss.
TEST_F(ModelParallelTest, EveryFamilySplitTwoWaysTrainsAsOneDevice) {
  const std::string sizes =
      "vocab_size: 64, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, "
      "max_position_embeddings: 32";
  const std::vector<std::pair<std::string, std::string>> families{
      {"Qwen2ForCausalLM", sizes + ", num_key_value_heads: 2, tie_word_embeddings: true"},
      {"GemmaForCausalLM", sizes + ", num_key_value_heads: 2, head_dim: 16"},
      {"Gemma2ForCausalLM", sizes + ", num_key_value_heads: 2, head_dim: 16"},
      {"Phi3ForCausalLM", sizes + ", num_key_value_heads: 4"},
      {"MixtralForCausalLM", sizes + ", num_key_value_heads: 2, num_local_experts: 4, output_router_logits: true"}};
  for (const auto& [family, args] : families) {
    SCOPED_TRACE(family);
    write(family + ".yaml", std::string(kRun) + "model:\n  class_path: " + family + "\n  init_args: {" + args +
                                "}\noptimizer:\n  class_path: SGD\n  init_args: {lr: 0.5, momentum: 0.9}\n");
    fit(family + ".yaml", family + "-one", {"--trainer.max_steps=6"});
    fit(family + ".yaml", family + "-tp2",
        {"--trainer.max_steps=6", "--trainer.devices=2", kTensorParallel[0],
         "--trainer.strategy.init_args.save_distributed_checkpoint=false"});
    expectClose(losses(family + "-tp2"), losses(family + "-one"), "train_loss");
    // Phi-3's fused projections make the fewest tensors: its 15 weights and the optimizer state.
    expectSameTensors(readCheckpoint(checkpoint(family + "-tp2", "last.ckpt")),
                      readCheckpoint(checkpoint(family + "-one", "last.ckpt")), 16);
  }
}

TEST_F(ModelParallelTest, KeyValueHeadsFewerThanRanksAreReplicated) {
  // 2 key/value heads on 4 ranks: each is held by 2 ranks, which sum its
  // projections' gradients.
  write("llama.yaml", std::string(kRun) + kLlama);
  fit("llama.yaml", "one", {"--trainer.max_steps=6"});
  fit("llama.yaml", "tp4",
      {"--trainer.max_steps=6", "--trainer.devices=4", kTensorParallel[0],
       "--trainer.strategy.init_args.save_distributed_checkpoint=false"});
  expectClose(losses("tp4"), losses("one"), "train_loss");
  expectSameTensors(readCheckpoint(checkpoint("tp4", "last.ckpt")), readCheckpoint(checkpoint("one", "last.ckpt")));
}

TEST_F(ModelParallelTest, Gpt2WithDropoutSplitTwoWaysTrainsAsOneDevice) {
  write("gpt2.yaml", std::string(kRun) + kGpt2);
  fit("gpt2.yaml", "one", {"--trainer.max_steps=6"});
  fit("gpt2.yaml", "tp2", {"--trainer.max_steps=6", "--trainer.devices=2", kTensorParallel[0]});
  expectClose(losses("tp2"), losses("one"), "train_loss");
}

TEST_F(ModelParallelTest, SequenceParallelTrainsAsOneDevice) {
  // Norms, residuals and GPT-2's dropouts on each rank's positions; the
  // dropout masks are the whole sequence's.
  const std::vector<std::string> split{"--trainer.devices=2", kTensorParallel[0],
                                       "--trainer.strategy.init_args.sequence_parallel=true",
                                       "--trainer.strategy.init_args.save_distributed_checkpoint=false"};
  write("llama.yaml", std::string(kRun) + kLlama);
  fit("llama.yaml", "one", {"--trainer.max_steps=6"});
  std::vector<std::string> args = split;
  args.push_back("--trainer.max_steps=6");
  fit("llama.yaml", "sp2", args);
  expectClose(losses("sp2"), losses("one"), "train_loss");
  expectSameTensors(readCheckpoint(checkpoint("sp2", "last.ckpt")), readCheckpoint(checkpoint("one", "last.ckpt")));
  write("gpt2.yaml", std::string(kRun) + kGpt2);
  fit("gpt2.yaml", "gpt2_one", {"--trainer.max_steps=6"});
  fit("gpt2.yaml", "gpt2_sp2", args);
  expectClose(losses("gpt2_sp2"), losses("gpt2_one"), "train_loss");
  // The sequence must split evenly.
  args.push_back("--data.init_args.block_size=15");
  args.push_back("--trainer.default_root_dir=odd");
  args.insert(args.begin(), {"fit", "-c", "llama.yaml"});
  const RunResult r = run(args);
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("sequence parallelism splits the 15 positions of a sequence across 2 tensor-parallel "
                               "ranks: choose a sequence length (data block_size) that they divide"));
}

TEST_F(ModelParallelTest, TensorTimesDataParallelTrainsAsDataParallel) {
  write("llama.yaml", std::string(kRun) + kLlama);
  fit("llama.yaml", "dp2", {"--trainer.max_steps=6", "--trainer.devices=2", "--trainer.strategy=hpu_parallel"});
  fit("llama.yaml", "tp2dp2",
      {"--trainer.max_steps=6", "--trainer.devices=4", kTensorParallel[0],
       "--trainer.strategy.init_args.tensor_parallel_size=2", "--trainer.strategy.init_args.data_parallel_size=2",
       "--trainer.strategy.init_args.save_distributed_checkpoint=false"});
  expectClose(losses("tp2dp2"), losses("dp2"), "train_loss");
  expectSameTensors(readCheckpoint(checkpoint("tp2dp2", "last.ckpt")), readCheckpoint(checkpoint("dp2", "last.ckpt")));
}

// A small Mixtral (4 experts, top 2) with its load-balancing loss.
constexpr const char* kMixtral = R"(model:
  class_path: MixtralForCausalLM
  init_args:
    vocab_size: 64
    hidden_size: 32
    intermediate_size: 24
    num_hidden_layers: 2
    num_attention_heads: 4
    num_key_value_heads: 2
    max_position_embeddings: 32
    num_local_experts: 4
    output_router_logits: true
optimizer:
  class_path: SGD
  init_args: {lr: 0.5, momentum: 0.9}
)";

// Two ranks, each holding half of every MoE layer's experts.
const std::vector<std::string> kExpertParallelTwo{"--trainer.devices=2", kTensorParallel[0],
                                                  "--trainer.strategy.init_args.tensor_parallel_size=1",
                                                  "--trainer.strategy.init_args.data_parallel_size=2",
                                                  "--trainer.strategy.init_args.expert_parallel_size=2"};

// Expert parallelism splits every MoE layer's experts across data-parallel
// replicas and moves tokens by all-to-all: the same math as data
// parallelism (each rank routes its own tokens), so EP2 trains as DP2 and
// EP2 x DP2 as DP4, losses (load-balancing term included) and every weight,
// each expert read from the file of the rank holding it.
TEST_F(ModelParallelTest, ExpertParallelTrainsAsDataParallel) {
  write("mixtral.yaml", std::string(kRun) + kMixtral);
  for (const int world : {2, 4}) {
    SCOPED_TRACE(world);
    const std::string dp = "dp" + std::to_string(world), ep = "ep2x" + std::to_string(world / 2);
    const std::string batch = "--data.init_args.batch_size=" + std::to_string(8 / world);
    fit("mixtral.yaml", dp,
        {"--trainer.max_steps=6", "--trainer.devices=" + std::to_string(world), "--trainer.strategy=hpu_parallel", batch});
    fit("mixtral.yaml", ep,
        {"--trainer.max_steps=6", "--trainer.devices=" + std::to_string(world), kTensorParallel[0],
         "--trainer.strategy.init_args.tensor_parallel_size=1",
         "--trainer.strategy.init_args.data_parallel_size=" + std::to_string(world),
         "--trainer.strategy.init_args.expert_parallel_size=2", batch});
    expectClose(losses(ep), losses(dp), "train_loss");
    const core::checkpoint::Checkpoint want = readCheckpoint(checkpoint(dp, "last.ckpt"));
    std::set<std::string> seen;
    for (int rank = 0; rank < world; ++rank) {
      const core::checkpoint::Checkpoint part = readCheckpoint(checkpoint(ep, "last.ckpt.rank" + std::to_string(rank)));
      for (const auto& t : part.tensors) {
        if (t.name.rfind("optimizer.", 0) == 0) continue;
        const auto* w = want.find(t.name);
        ASSERT_NE(w, nullptr) << t.name;
        ASSERT_EQ(t.values.size(), w->values.size()) << t.name;
        for (std::size_t i = 0; i < t.values.size(); ++i)
          ASSERT_LE(std::abs(double(t.values[i]) - double(w->values[i])),
                    kAbsTolerance + kRelTolerance * std::abs(double(w->values[i])))
              << t.name << "[" << i << "] on rank " << rank;
        seen.insert(t.name);
        // Rank 0 and 2 hold experts 0 and 1, ranks 1 and 3 experts 2 and 3.
        if (const auto at = t.name.find(".experts."); at != std::string::npos) {
          EXPECT_EQ(std::stoi(t.name.substr(at + 9)) / 2, rank % 2) << t.name;
        }
      }
    }
    std::size_t model_tensors = 0;
    for (const auto& t : want.tensors) model_tensors += t.name.rfind("optimizer.", 0) != 0;
    EXPECT_EQ(seen.size(), model_tensors) << "every weight of the model, each expert on one rank";
  }
}

// The model summary counts the whole model on an expert-parallel rank, which
// holds half of each layer's experts: every parameter trainable, or with
// LoRA only the adapters. kMixtral has 29,088 parameters (embedding and
// lm_head 2 x 64 x 32, final norm 32, and per layer attention 3,072, norms
// 64, router 128, 4 experts of 3 x 32 x 24); LoRA r 2 on q_proj (32 -> 32)
// and v_proj (32 -> 16) adds 2 x (2 x 32 + 32 x 2 + 2 x 32 + 16 x 2) = 448.
TEST_F(ModelParallelTest, ExpertParallelModelSummaryCountsTheWholeModel) {
  write("mixtral.yaml", std::string(kRun) + kMixtral);
  const std::vector<std::string>& ep = kExpertParallelTwo;
  // (trainable, total) of RichModelSummary's exact counts.
  const auto counts = [&](const std::string& root, const std::vector<std::string>& layout) {
    std::vector<std::string> args{"fit", "-c", "mixtral.yaml", "--trainer.default_root_dir=" + root,
                                  "--trainer.max_steps=1", "--trainer.callbacks+=RichModelSummary"};
    args.insert(args.end(), layout.begin(), layout.end());
    const RunResult r = run(args);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    std::smatch m;
    static const std::regex kTotals("Trainable params: ([0-9,]+).*\\nNon-trainable params: [0-9,]+.*\\n"
                                    "Total params: ([0-9,]+)");
    if (!std::regex_search(r.out, m, kTotals)) {
      ADD_FAILURE() << "no summary totals in " << r.describe();
      return std::pair<std::string, std::string>();
    }
    return std::pair<std::string, std::string>(m[1], m[2]);
  };
  using Counts = std::pair<std::string, std::string>;
  EXPECT_EQ(counts("one", {}), Counts("29,088", "29,088"));
  EXPECT_EQ(counts("ep2", ep), Counts("29,088", "29,088"));
  const std::string lora = "--model.init_args.lora={r: 2, target_modules: [q_proj, v_proj]}";
  EXPECT_EQ(counts("one_lora", {lora}), Counts("448", "29,536"));
  EXPECT_EQ(counts("ep2_lora", plus(ep, {lora})), Counts("448", "29,536"));
}

// Under tensor parallelism each expert is split as a dense MLP: TP 2 x DP 2
// with the experts across the 2 copies trains as TP 2 x DP 2.
TEST_F(ModelParallelTest, ExpertParallelComposesWithTensorParallel) {
  write("mixtral.yaml", std::string(kRun) + kMixtral);
  const std::vector<std::string> layout{"--trainer.max_steps=6", "--trainer.devices=4", kTensorParallel[0],
                                        "--trainer.strategy.init_args.tensor_parallel_size=2",
                                        "--trainer.strategy.init_args.data_parallel_size=2",
                                        "--data.init_args.batch_size=4"};
  fit("mixtral.yaml", "tp2dp2", layout);
  fit("mixtral.yaml", "tp2dp2ep2", plus(layout, {"--trainer.strategy.init_args.expert_parallel_size=2"}));
  expectClose(losses("tp2dp2ep2"), losses("tp2dp2"), "train_loss");
  EXPECT_EQ(losses("tp2dp2ep2").size(), 6u);
}

// An expert-parallel checkpoint (each rank's experts in its own file)
// resumes in another layout as if the run had never stopped, and
// consolidates into the file data parallelism saves.
TEST_F(ModelParallelTest, ExpertParallelCheckpointResumesInAnotherLayoutAndConsolidates) {
  write("mixtral.yaml", std::string(kRun) + kMixtral);
  const std::vector<std::string> dp2{"--trainer.devices=2", "--trainer.strategy=hpu_parallel",
                                     "--data.init_args.batch_size=4"};
  const std::vector<std::string> ep2 = plus(kExpertParallelTwo, {"--data.init_args.batch_size=4"});
  fit("mixtral.yaml", "dp2", dp2);
  const std::vector<double> whole_run = losses("dp2");
  fit("mixtral.yaml", "ep2", plus(ep2, {"--trainer.max_steps=5"}));
  const fs::path step5 = checkpoint("ep2", "last.ckpt");
  ASSERT_TRUE(fs::exists(step5.string() + ".rank1"));
  const std::vector<double> rest(whole_run.begin() + 5, whole_run.end());
  fit("mixtral.yaml", "dp2_resumed", plus(dp2, {"--ckpt_path=" + step5.string()}));
  expectClose(losses("dp2_resumed"), rest, "steps 6-10 resumed under data parallelism");
  fit("mixtral.yaml", "ep2_resumed", plus(ep2, {"--ckpt_path=" + step5.string()}));
  expectClose(losses("ep2_resumed"), rest, "steps 6-10 resumed in the same layout");
  const RunResult c = run({"consolidate", step5.string(), "whole.ckpt"});
  ASSERT_EQ(c.exit_code, 0) << c.describe();
  expectSameTensors(readCheckpoint(dir() / "whole.ckpt"), readCheckpoint(checkpoint("dp2", "epoch=0-step=5.ckpt")));
}

// Pipeline stages hold their layers' experts split across the copies: PP 2
// x DP 2 with EP 2 trains as PP 2 x DP 2, and both consolidate into one
// device's file alike (without the load-balancing loss, which needs every
// layer's routing in one place).
TEST_F(ModelParallelTest, ExpertParallelComposesWithPipelineStages) {
  std::string config = std::string(kRun) + kMixtral;
  config.replace(config.find("output_router_logits: true"), 26, "output_router_logits: false");
  write("mixtral.yaml", config);
  const std::vector<std::string> layout{"--trainer.max_steps=6", "--trainer.devices=4", kTensorParallel[0],
                                        "--trainer.accumulate_grad_batches=2",
                                        "--trainer.strategy.init_args.tensor_parallel_size=1",
                                        "--trainer.strategy.init_args.data_parallel_size=2",
                                        "--trainer.strategy.init_args.pipeline_parallel_size=2",
                                        "--data.init_args.batch_size=2"};
  fit("mixtral.yaml", "pp2dp2", layout);
  fit("mixtral.yaml", "pp2dp2ep2", plus(layout, {"--trainer.strategy.init_args.expert_parallel_size=2"}));
  expectClose(losses("pp2dp2ep2"), losses("pp2dp2"), "train_loss");
  for (const std::string root : {"pp2dp2", "pp2dp2ep2"})
    ASSERT_EQ(run({"consolidate", checkpoint(root, "last.ckpt").string(), root + ".ckpt"}).exit_code, 0) << root;
  expectSameTensors(readCheckpoint(dir() / "pp2dp2ep2.ckpt"), readCheckpoint(dir() / "pp2dp2.ckpt"));
}

// ZeRO-1 shards each bucket's optimizer state over the replicas holding its
// parameters: the experts' over the copies holding the same experts. EP 2 x
// DP 4 trains as DP 4, and its consolidated file is DP 4's.
TEST_F(ModelParallelTest, ExpertParallelWithZeRO1ShardsTheExpertsStateOverTheirReplicas) {
  write("mixtral.yaml", std::string(kRun) + kMixtral);
  fit("mixtral.yaml", "dp4",
      {"--trainer.max_steps=6", "--trainer.devices=4", "--trainer.strategy=hpu_parallel", "--data.init_args.batch_size=2"});
  fit("mixtral.yaml", "ep2zero1",
      {"--trainer.max_steps=6", "--trainer.devices=4", kTensorParallel[0],
       "--trainer.strategy.init_args.tensor_parallel_size=1", "--trainer.strategy.init_args.data_parallel_size=4",
       "--trainer.strategy.init_args.expert_parallel_size=2", "--trainer.strategy.init_args.zero_stage=1",
       "--data.init_args.batch_size=2"});
  expectClose(losses("ep2zero1"), losses("dp4"), "train_loss");
  ASSERT_EQ(run({"consolidate", checkpoint("ep2zero1", "last.ckpt").string(), "whole.ckpt"}).exit_code, 0);
  expectSameTensors(readCheckpoint(dir() / "whole.ckpt"), readCheckpoint(checkpoint("dp4", "last.ckpt")));
}

// Expert parallelism beyond training from a config: each rank reads its own
// experts of a pretrained directory (the whole model checked against the
// files), LoRA freezes the experts and still splits them, and bf16
// generation (where a rank may compute no expert rows for a token) gives
// one device's tokens.
TEST_F(ModelParallelTest, ExpertParallelLoadsPretrainedTrainsLoraAndGeneratesAsOneDevice) {
  write("mixtral.yaml", std::string(kRun) + kMixtral);
  const std::vector<std::string>& ep = kExpertParallelTwo;
  const std::vector<std::string> dp{"--trainer.devices=2", "--trainer.strategy=hpu_parallel"};
  fit("mixtral.yaml", "base", {"--trainer.max_steps=2"});
  ASSERT_EQ(run({"export", "--ckpt_path", checkpoint("base", "last.ckpt").string(), "--output", "hf"}).exit_code, 0);
  const std::string pretrained = "--model.init_args.pretrained=hf";
  fit("mixtral.yaml", "dp_pretrained", plus(dp, {pretrained, "--trainer.max_steps=4"}));
  fit("mixtral.yaml", "ep_pretrained", plus(ep, {pretrained, "--trainer.max_steps=4"}));
  expectClose(losses("ep_pretrained"), losses("dp_pretrained"), "pretrained");
  const std::string lora = "--model.init_args.lora={r: 2, target_modules: [q_proj, v_proj]}";
  fit("mixtral.yaml", "dp_lora", plus(dp, {lora, "--trainer.max_steps=4"}));
  fit("mixtral.yaml", "ep_lora", plus(ep, {lora, "--trainer.max_steps=4"}));
  expectClose(losses("ep_lora"), losses("dp_lora"), "lora");

  std::string words;
  for (int i = 0; i < 20; ++i) words += "the quick brown fox jumps over the lazy dog\n";
  write("words.txt", words);
  const auto generate = [&](const std::string& root, const std::vector<std::string>& layout) {
    std::vector<std::string> args{"predict", "-c", "mixtral.yaml", "--data=TextDataModule",
                                  "--data.init_args.path=words.txt", "--data.init_args.block_size=8", "--model.init_args.vocab_size=256",
                                  "--trainer.precision=bf16-mixed", "--trainer.logger=false",
                                  "--trainer.default_root_dir=" + root, "--model.init_args.prompt=the quick",
                                  "--model.init_args.max_new_tokens=8"};
    args.insert(args.end(), layout.begin(), layout.end());
    const RunResult r = run(args);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    return read(root + "/predictions.jsonl");
  };
  EXPECT_EQ(generate("ep_tokens", ep), generate("one_tokens", {}));
}

TEST_F(ModelParallelTest, ExpertParallelLayoutsThatCannotWorkAreRefusedByName) {
  write("mixtral.yaml", std::string(kRun) + kMixtral);
  const auto refusal = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"fit", "-c", "mixtral.yaml", "--trainer.default_root_dir=bad", kTensorParallel[0],
                                  "--trainer.strategy.init_args.tensor_parallel_size=1"};
    args.insert(args.end(), extra.begin(), extra.end());
    const RunResult r = run(args);
    expectRefusedBeforeRanksStart(r);
    return r.err;
  };
  EXPECT_THAT(refusal({"--trainer.devices=2", "--trainer.strategy.init_args.data_parallel_size=2",
                       "--trainer.strategy.init_args.expert_parallel_size=4"}),
              HasSubstr("trainer.strategy.init_args.expert_parallel_size=4: the experts split across data-parallel "
                        "replicas, and 4 does not divide data_parallel_size 2"));
  EXPECT_THAT(refusal({"--trainer.devices=2", "--trainer.strategy.init_args.data_parallel_size=2",
                       "--trainer.strategy.init_args.expert_parallel_size=2", "--model.init_args.num_local_experts=3"}),
              HasSubstr("num_local_experts 3 cannot be split across 2 expert-parallel ranks"));
}

// Expert parallelism under HPUDeepSpeedStrategy (DeepSpeed-MoE's "E + D + Z"
// layouts): `stage` over `world` ranks, the experts split across
// `expert_parallel_size` of them, each rank reading 8 / world rows a step.
std::vector<std::string> deepspeedMoe(int stage, int world, int expert_parallel_size) {
  return {"--trainer.devices=" + std::to_string(world),
          "--trainer.strategy=lightning_habana.pytorch.strategies.HPUDeepSpeedStrategy",
          "--trainer.strategy.init_args.stage=" + std::to_string(stage),
          "--trainer.strategy.init_args.expert_parallel_size=" + std::to_string(expert_parallel_size),
          "--data.init_args.batch_size=" + std::to_string(8 / world)};
}

// The clipping norms rank 0 prints, step after step (HPU_LOG_LEVEL=debug).
std::vector<double> clippingNorms(const std::string& err) {
  static const std::regex kNorm(R"((?:\[rank (\d)\] )?debug: gradient_clip_val \S+: the gradients' total norm is (\S+))");
  std::vector<double> out;
  for (std::sregex_iterator it(err.begin(), err.end(), kNorm), end; it != end; ++it)
    if (!(*it)[1].matched || (*it)[1] == "0") out.push_back(std::stod((*it)[2]));
  return out;
}

// ZeRO stages 0, 1 and 2 with the experts split across 2 ranks, on 2 and 4
// ranks: the experts' gradients averaged over the ranks holding them, their
// shards taken over those ranks, train to the losses and the consolidated
// weights and optimizer state of the same stage without expert parallelism
// and of hpu_parallel, gradient clipping included (its norm, which clips
// every step here, is one device's: each element counted once).
TEST_F(ModelParallelTest, DeepSpeedExpertParallelTrainsAsDataParallel) {
  write("mixtral.yaml", std::string(kRun) + kMixtral);
  env()["HPU_LOG_LEVEL"] = "debug";
  struct Run {
    std::vector<double> norms;            // rank 0's clipping norms
    core::checkpoint::Checkpoint whole;  // the last checkpoint, consolidated when written by several ranks
  };
  const auto fitRun = [&](const std::string& root, const std::vector<std::string>& layout) {
    const RunResult r = run(plus({"fit", "-c", "mixtral.yaml", "--trainer.default_root_dir=" + root, "--trainer.max_steps=6",
                                  "--trainer.gradient_clip_val=0.05"},
                                 layout));
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    const fs::path last = checkpoint(root, "last.ckpt");
    if (!fs::exists(last.string() + ".rank0")) return Run{clippingNorms(r.err), readCheckpoint(last)};
    const RunResult c = run({"consolidate", last.string(), root + ".ckpt"});
    EXPECT_EQ(c.exit_code, 0) << c.describe();
    return Run{clippingNorms(r.err), readCheckpoint(dir() / (root + ".ckpt"))};
  };
  for (const int world : {2, 4}) {
    SCOPED_TRACE(world);
    const std::string dp = "dp" + std::to_string(world);
    const Run want = fitRun(dp, {"--trainer.devices=" + std::to_string(world), "--trainer.strategy=hpu_parallel",
                                 "--data.init_args.batch_size=" + std::to_string(8 / world)});
    ASSERT_EQ(want.norms.size(), 6u);
    for (const double norm : want.norms) EXPECT_GT(norm, 0.05) << "gradient_clip_val clips every step";
    for (const int stage : {0, 1, 2}) {
      SCOPED_TRACE(stage);
      const std::string zero = "zero" + std::to_string(stage) + "x" + std::to_string(world);
      const Run without = fitRun(zero, deepspeedMoe(stage, world, 1));
      const Run ep = fitRun(zero + "ep2", deepspeedMoe(stage, world, 2));
      EXPECT_TRUE(fs::exists(checkpoint(zero + "ep2", "last.ckpt").string() + ".rank" + std::to_string(world - 1)));
      expectClose(ep.norms, want.norms, "clipping norm");
      expectClose(without.norms, want.norms, "clipping norm without expert parallelism");
      expectClose(losses(zero + "ep2"), losses(dp), "train_loss");
      expectSameTensors(ep.whole, without.whole);
      expectSameTensors(ep.whole, want.whole);
    }
  }
}

// Experts no rank routed a token to get no gradient from their backward:
// with 2 tokens a rank, each to 1 of 4 experts, most steps leave some
// expert of one rank unused and not the other's. Their zero gradients count
// at the end of their block's backward on every rank, so the ranks reduce
// their buckets between the same all-to-alls: 20 such steps under both
// strategies train as hpu_parallel (at a learning rate that keeps 2-token
// batches from diverging, which would magnify float rounding).
TEST_F(ModelParallelTest, ExpertsNoTokenChoseKeepTheRanksCollectivesInOneOrder) {
  write("mixtral.yaml", std::string(kRun) + kMixtral);
  const std::vector<std::string> sparse{"--trainer.max_steps=20", "--trainer.devices=2", "--data.init_args.batch_size=1",
                                        "--data.init_args.block_size=2", "--model.init_args.num_experts_per_tok=1",
                                        "--optimizer.init_args.lr=0.05"};
  fit("mixtral.yaml", "dp2", plus(sparse, {"--trainer.strategy=hpu_parallel"}));
  fit("mixtral.yaml", "ep2", plus(sparse, {kTensorParallel[0], "--trainer.strategy.init_args.tensor_parallel_size=1",
                                           "--trainer.strategy.init_args.data_parallel_size=2",
                                           "--trainer.strategy.init_args.expert_parallel_size=2"}));
  fit("mixtral.yaml", "zero2ep2",
      plus(sparse, {"--trainer.strategy=HPUDeepSpeedStrategy", "--trainer.strategy.init_args.stage=2",
                    "--trainer.strategy.init_args.expert_parallel_size=2"}));
  ASSERT_EQ(losses("dp2").size(), 20u);
  expectClose(losses("ep2"), losses("dp2"), "ModelParallelStrategy's train_loss");
  expectClose(losses("zero2ep2"), losses("dp2"), "HPUDeepSpeedStrategy's train_loss");
}

// A ZeRO-2 expert-parallel checkpoint (every rank's experts and optimizer
// state in its own file) resumes in its own layout and under hpu_parallel
// as if the run had never stopped.
TEST_F(ModelParallelTest, DeepSpeedExpertParallelCheckpointResumes) {
  write("mixtral.yaml", std::string(kRun) + kMixtral);
  const std::vector<std::string> ep2 = deepspeedMoe(2, 2, 2);
  fit("mixtral.yaml", "whole", ep2);
  const std::vector<double> whole_run = losses("whole");
  ASSERT_EQ(whole_run.size(), 10u);
  fit("mixtral.yaml", "first", plus(ep2, {"--trainer.max_steps=5"}));
  const fs::path step5 = checkpoint("first", "last.ckpt");
  EXPECT_EQ(fileNames(step5.parent_path()),
            (std::vector<std::string>{"epoch=0-step=5.ckpt", "epoch=0-step=5.ckpt.rank0", "epoch=0-step=5.ckpt.rank1",
                                      "last.ckpt", "last.ckpt.rank0", "last.ckpt.rank1"}));
  const std::vector<double> rest(whole_run.begin() + 5, whole_run.end());
  fit("mixtral.yaml", "resumed", plus(ep2, {"--ckpt_path=" + step5.string()}));
  expectClose(losses("resumed"), rest, "steps 6-10 resumed in the same layout");
  for (const char* rank : {".rank0", ".rank1"})
    expectSameTensors(readCheckpoint(checkpoint("resumed", "last.ckpt").string() + rank),
                      readCheckpoint(checkpoint("whole", "last.ckpt").string() + rank));
  fit("mixtral.yaml", "parallel",
      {"--trainer.devices=2", "--trainer.strategy=hpu_parallel", "--data.init_args.batch_size=4",
       "--ckpt_path=" + step5.string()});
  expectClose(losses("parallel"), rest, "steps 6-10 resumed under hpu_parallel");
}

// What DeepSpeed-MoE cannot run is refused by the process the user started.
TEST_F(ModelParallelTest, DeepSpeedExpertParallelLayoutsThatCannotWorkAreRefusedByName) {
  write("mixtral.yaml", std::string(kRun) + kMixtral);
  write("llama.yaml", std::string(kRun) + kLlama);
  const auto refusal = [&](const std::string& config, const std::vector<std::string>& layout) {
    const RunResult r = run(plus({"fit", "-c", config, "--trainer.default_root_dir=bad"}, layout));
    expectRefusedBeforeRanksStart(r);
    return r.err;
  };
  EXPECT_THAT(refusal("mixtral.yaml", deepspeedMoe(3, 2, 2)),
              HasSubstr("error: trainer.strategy.init_args.expert_parallel_size=2: ZeRO stage 3 cannot hold experts "
                        "split across ranks (DeepSpeed: \"MoE not supported with Stage 3\": stage 3 partitions every "
                        "parameter over all ranks); use stage 1 or 2 with expert_parallel_size 2, or stage 3 with "
                        "expert_parallel_size 1, where each rank gathers a MoE layer's experts whole with the layer "
                        "(transformers' set_z3_leaf_modules)"));
  EXPECT_THAT(refusal("mixtral.yaml", deepspeedMoe(2, 2, 4)),
              HasSubstr("error: trainer.strategy.init_args.expert_parallel_size=4: the experts split across "
                        "data-parallel ranks, and 4 does not divide the world size 2 (trainer.devices 2 x "
                        "trainer.num_nodes 1)"));
  EXPECT_THAT(refusal("llama.yaml", deepspeedMoe(1, 2, 2)),
              HasSubstr("error: trainer.strategy.init_args.expert_parallel_size=2: the model has no mixture of "
                        "experts to split (MixtralForCausalLM has); use expert_parallel_size 1"));
}

TEST_F(ModelParallelTest, DistributedCheckpointResumesInAnotherLayout) {
  write("llama.yaml", std::string(kRun) + kLlama);
  fit("llama.yaml", "one", {});
  const std::vector<double> whole_run = losses("one");
  // 5 steps on 2 ranks, each writing its own pieces.
  fit("llama.yaml", "tp2", {"--trainer.max_steps=5", "--trainer.devices=2", kTensorParallel[0]});
  const fs::path step5 = checkpoint("tp2", "last.ckpt");
  EXPECT_TRUE(fs::exists(step5.string() + ".rank0"));
  EXPECT_TRUE(fs::exists(step5.string() + ".rank1"));
  const std::vector<double> rest(whole_run.begin() + 5, whole_run.end());
  for (const auto& [root, layout] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"tp1", {}},
           {"tp2_again", {"--trainer.devices=2", kTensorParallel[0]}},
           {"tp4", {"--trainer.devices=4", kTensorParallel[0]}}}) {
    std::vector<std::string> args = layout;
    args.push_back("--ckpt_path=" + step5.string());
    fit("llama.yaml", root, args);
    expectClose(losses(root), rest, "steps 6-10 resumed as " + root);
  }
  // consolidate: one file, the one a device saves at step 5.
  const RunResult c = run({"consolidate", step5.string(), "whole.ckpt"});
  ASSERT_EQ(c.exit_code, 0) << c.describe();
  core::checkpoint::Checkpoint whole = readCheckpoint(dir() / "whole.ckpt");
  EXPECT_EQ(whole.metadata.count("distributed_checkpoint"), 0u);
  expectSameTensors(whole, readCheckpoint(checkpoint("one", "epoch=0-step=5.ckpt")));
  // Tensor x data parallel to 4 data-parallel ranks: the same weights and
  // optimizer state as its consolidated file gives them.
  fit("llama.yaml", "tp2dp2",
      {"--trainer.max_steps=5", "--trainer.devices=4", kTensorParallel[0],
       "--trainer.strategy.init_args.tensor_parallel_size=2", "--trainer.strategy.init_args.data_parallel_size=2"});
  const fs::path tp2dp2 = checkpoint("tp2dp2", "last.ckpt");
  ASSERT_EQ(run({"consolidate", tp2dp2.string(), "tp2dp2.ckpt"}).exit_code, 0);
  const std::vector<std::string> dp4{"--trainer.devices=4", "--trainer.strategy=hpu_parallel"};
  fit("llama.yaml", "dp4_from_parts", plus(dp4, {"--ckpt_path=" + tp2dp2.string()}));
  fit("llama.yaml", "dp4_from_whole", plus(dp4, {"--ckpt_path=" + (dir() / "tp2dp2.ckpt").string()}));
  EXPECT_EQ(losses("dp4_from_parts").size(), 5u);
  EXPECT_EQ(losses("dp4_from_parts"), losses("dp4_from_whole"));
  expectSameTensors(readCheckpoint(checkpoint("dp4_from_parts", "last.ckpt")),
                    readCheckpoint(checkpoint("dp4_from_whole", "last.ckpt")));
}

// Byte-level Llama on Debian's fortunes (on top of kRun), trained a
// little, then sampled.
constexpr const char* kText = R"(seed_everything: 3
model:
  class_path: LlamaForCausalLM
  init_args:
    hidden_size: 64
    intermediate_size: 96
    num_hidden_layers: 2
    num_attention_heads: 4
    num_key_value_heads: 2
    max_position_embeddings: 64
    prompts: ["The meaning of life is", "Linux is"]
    max_new_tokens: 24
    do_sample: true
data:
  class_path: TextDataModule
  init_args: {path: /usr/share/games/fortunes/linux, block_size: 64, batch_size: 4, val_split: 0.05}
optimizer:
  class_path: AdamW
  init_args: {lr: 0.005}
)";

TEST_F(ModelParallelTest, GenerationSplitAcrossRanksSamplesWhatOneDeviceSamples) {
  if (!fs::exists("/usr/share/games/fortunes/linux")) GTEST_SKIP() << "Debian's fortunes package is not installed";
  write("run.yaml", kRun);
  write("text.yaml", kText);
  fit("run.yaml", "train", {"-c", "text.yaml", "--trainer.max_steps=30"});
  const std::string ckpt = "--ckpt_path=" + checkpoint("train", "last.ckpt").string();
  const auto predictions = [&](const std::string& root) {
    return read(root + "/lightning_logs/version_0/predictions.jsonl");
  };
  const auto predict = [&](const std::string& root, std::vector<std::string> args) {
    args.insert(args.begin(),
                {"predict", "-c", "run.yaml", "-c", "text.yaml", ckpt, "--trainer.default_root_dir=" + root});
    const RunResult r = run(args);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
  };
  predict("one", {});
  // The key/value cache holds each rank's heads; the last position's logits
  // are gathered to pick every token.
  predict("tp2", {"--trainer.devices=2", kTensorParallel[0]});
  EXPECT_EQ(predictions("tp2"), predictions("one"));
  // DeepSpeed-inference's tensor_parallel is the same split.
  write("ds.yaml", "trainer:\n  strategy:\n    class_path: HPUDeepSpeedStrategy\n    init_args:\n      config: "
                   "{tensor_parallel: {tp_size: 2}}\n");
  predict("ds_tp2", {"-c", "ds.yaml", "--trainer.devices=2"});
  EXPECT_EQ(predictions("ds_tp2"), predictions("one"));
  const RunResult fit_ds = run({"fit", "-c", "run.yaml", "-c", "text.yaml", "-c", "ds.yaml", "--trainer.devices=2"});
  EXPECT_EQ(fit_ds.exit_code, 2) << fit_ds.describe();
  EXPECT_THAT(fit_ds.err, HasSubstr("error: trainer.strategy: the DeepSpeed config's tensor_parallel (tp_size 2) is "
                                    "DeepSpeed-inference's: it serves predict, validate and test; to train "
                                    "tensor-parallel use ModelParallelStrategy (tensor_parallel_size: 2)"));
  // Data-parallel ranks' generations are gathered in the prompts' order;
  // the repeat of "a" that pads rank 1's share of 3 prompts is dropped.
  const std::vector<std::string> greedy{"--model.init_args.do_sample=false", "--model.init_args.prompts=[a, b, c]"};
  predict("greedy_one", greedy);
  std::vector<std::string> data_parallel = greedy;
  data_parallel.insert(data_parallel.end(), {"--trainer.devices=2", "--trainer.strategy=hpu_parallel"});
  predict("greedy_dp2", data_parallel);
  const std::string greedy_one = predictions("greedy_one");
  EXPECT_EQ(predictions("greedy_dp2"), greedy_one);
  EXPECT_EQ(std::count(greedy_one.begin(), greedy_one.end(), '\n'), 3);
  // fp8 measurement: every rank's pieces together are one device's whole layers.
  const std::vector<std::string> fp8{"--trainer.plugins+=lightning_habana.pytorch.plugins.precision.HPUPrecisionPlugin",
                                     "--trainer.plugins.precision=fp8", "--trainer.plugins.inference=true",
                                     "--trainer.plugins.quant=false"};
  predict("one", fp8);
  const std::string measured = read("one/hqt_output/measure.json");
  std::vector<std::string> split = fp8;
  split.insert(split.end(), {"--trainer.devices=2", kTensorParallel[0]});
  predict("tp2", split);
  // The same layers and tensors, each maximum within one bfloat16 step of
  // one device's (a row-parallel layer's output sums its pieces in another
  // order, which may round a bfloat16 activation to its neighbour).
  const nlohmann::json one_max = nlohmann::json::parse(measured)["Nodes"];
  const nlohmann::json split_max = nlohmann::json::parse(read("tp2/hqt_output/measure.json"))["Nodes"];
  ASSERT_EQ(split_max.size(), one_max.size());
  EXPECT_TRUE(one_max.contains("model.layers.1.self_attn.o_proj"));
  for (const auto& [layer, m] : one_max.items()) {
    ASSERT_TRUE(split_max.contains(layer)) << layer;
    const double input = m["inputs"][0], weight = m["params"]["weight"];
    EXPECT_NEAR(split_max[layer]["inputs"][0].get<double>(), input, input / 128) << layer;
    EXPECT_EQ(split_max[layer]["params"]["weight"].get<double>(), weight) << layer;
  }
}

// The norm gradient_clip_val clips by, as the Trainer's debug line prints
// it (17 digits: the bits), is one device's in every layout that holds one
// device's gradients: BoringModel's layer is replicated on each
// tensor-parallel rank, which sees the batches one device sees, and its part
// of the norm counts half on each.
TEST_F(ModelParallelTest, TheClippingNormIsOneDevicesToTheBitInEveryLayout) {
  env()["HPU_LOG_LEVEL"] = "debug";
  static const std::regex kNorm(
      R"((?:\[rank (\d)\] )?debug: gradient_clip_val 0\.01: the gradients' total norm is (\S+))");
  // Each rank's norms, step after step.
  const auto norms = [&](const std::string& root, std::vector<std::string> args) {
    args.insert(args.end(), {"--trainer.gradient_clip_val=0.01", "--trainer.max_steps=4",
                             "--trainer.default_root_dir=" + root});
    const RunResult r = boring("fit", args);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    std::map<int, std::vector<std::string>> out;
    for (std::sregex_iterator it(r.err.begin(), r.err.end(), kNorm), end; it != end; ++it)
      out[(*it)[1].matched ? std::stoi((*it)[1]) : 0].push_back((*it)[2]);
    return out;
  };
  const std::vector<std::string> one = norms("one", {}).at(0);
  ASSERT_EQ(one.size(), 4u);
  for (const auto& [root, layout] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"tp2", {"--trainer.devices=2", kTensorParallel[0], "--trainer.strategy.init_args.tensor_parallel_size=2"}},
           {"tp2_zero1",
            {"--trainer.devices=2", kTensorParallel[0], "--trainer.strategy.init_args.tensor_parallel_size=2",
             "--trainer.strategy.init_args.zero_stage=1"}},
           {"deepspeed", {"--trainer.strategy=deepspeed_stage_2"}}}) {
    const std::map<int, std::vector<std::string>> got = norms(root, layout);
    EXPECT_EQ(got.size(), root == "deepspeed" ? 1u : 2u) << root;
    for (const auto& [rank, values] : got) EXPECT_EQ(values, one) << root << ", rank " << rank;
  }
}

// DeepSpeed-inference's tensor parallelism pads a vocabulary only to a
// multiple of its ranks, as DeepSpeed's AutoTP splits it unpadded;
// ModelParallelStrategy pads as Megatron-LM does (128 x the ranks), and
// make_vocab_size_divisible_by decides for both when given.
TEST_F(ModelParallelTest, DeepSpeedInferencePadsTheVocabularyOnlyToItsRanks) {
  write("llama.yaml", std::string(kRun) + kLlama);
  write("ds.yaml", "trainer:\n  strategy:\n    class_path: HPUDeepSpeedStrategy\n    init_args:\n      config: "
                   "{tensor_parallel: {tp_size: 2}}\n");
  const auto parameters = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"estimate", "predict", "-c", "llama.yaml", "--trainer.devices=2",
                               "--model.init_args.vocab_size=61", "--data.init_args.vocab_size=61",
                               "--model.init_args.max_new_tokens=8"});
    const RunResult r = run(args);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    const auto at = r.out.find("parameters");
    return at == std::string::npos ? r.out : r.out.substr(at, r.out.find('\n', at) - at);
  };
  // 61 rows: 62 on 2 ranks (1 x 32 x 2 padding), or 256 (195 x 32 x 2).
  EXPECT_EQ(parameters({"-c", "ds.yaml"}), "parameters            19424 (+64 vocabulary padding)");
  EXPECT_EQ(parameters({kTensorParallel[0]}), "parameters            19424 (+12480 vocabulary padding)");
  EXPECT_EQ(parameters({"-c", "ds.yaml", "--model.init_args.make_vocab_size_divisible_by=128"}),
            "parameters            19424 (+12480 vocabulary padding)");
}

// A vocabulary of 61 tokens (which no tensor-parallel size divides) is
// padded under tensor parallelism (Megatron-LM's make_vocab_size_divisible_by,
// 128 x the ranks by default): 2 and 4 ranks train to one device's losses,
// weights and momentum (the gradients' sum), its checkpoints hold the
// unpadded [61, 32] tensors, a distributed checkpoint consolidates to one
// device's and resumes padded otherwise (4 ranks: 512 rows; 2 ranks with
// make_vocab_size_divisible_by 3: 66) or unpadded on one device. GPT-2's
// tied head stays tied. The summary counts the padding apart.
TEST_F(ModelParallelTest, AnOddVocabularyIsPaddedAndTrainsAsOneDevice) {
  const std::vector<std::string> odd{"--model.init_args.vocab_size=61", "--data.init_args.vocab_size=61"};
  const std::vector<std::string> whole_file{"--trainer.strategy.init_args.save_distributed_checkpoint=false"};
  write("llama.yaml", std::string(kRun) + kLlama);
  fit("llama.yaml", "one", odd);
  const std::vector<double> one = losses("one");
  ASSERT_EQ(one.size(), 10u);
  const auto one_ckpt = readCheckpoint(checkpoint("one", "last.ckpt"));
  EXPECT_EQ(one_ckpt.find("lm_head.weight")->shape, (std::vector<std::int64_t>{61, 32}));
  {
    const RunResult r = run(plus({"fit", "-c", "llama.yaml", "--trainer.default_root_dir=tp4",
                                  "--trainer.enable_model_summary=true", "--trainer.devices=4", kTensorParallel[0]},
                                 plus(odd, whole_file)));
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    // 61 rows padded to 512 in the embedding and the head: 451 x 32 x 2.
    EXPECT_THAT(r.out, HasSubstr("Total params: 19,424 (19.4 K) (+28,864 vocabulary padding)"));
    EXPECT_THAT(r.out, HasSubstr("out_features=61, bias=false, column-parallel x4, out_features padded to a "
                                 "multiple of 512"));
    expectClose(losses("tp4"), one, "train_loss on 4 ranks");
    expectSameTensors(readCheckpoint(checkpoint("tp4", "last.ckpt")), one_ckpt);
  }
  // 2 ranks, each writing its pieces (128 rows of 256).
  fit("llama.yaml", "tp2", plus(odd, {"--trainer.devices=2", kTensorParallel[0]}));
  expectClose(losses("tp2"), one, "train_loss on 2 ranks");
  const fs::path step5 = checkpoint("tp2", "epoch=0-step=5.ckpt");
  ASSERT_EQ(run({"consolidate", step5.string(), "whole.ckpt"}).exit_code, 0);
  expectSameTensors(readCheckpoint(dir() / "whole.ckpt"), readCheckpoint(checkpoint("one", "epoch=0-step=5.ckpt")));
  const std::vector<double> rest(one.begin() + 5, one.end());
  for (const auto& [root, layout] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"resumed_one", {}},
           {"resumed_tp4", {"--trainer.devices=4", kTensorParallel[0]}},
           {"resumed_tp2_by_3",
            {"--trainer.devices=2", kTensorParallel[0], "--model.init_args.make_vocab_size_divisible_by=3"}}}) {
    fit("llama.yaml", root, plus(plus(odd, layout), {"--ckpt_path=" + step5.string()}));
    expectClose(losses(root), rest, "steps 6-10 resumed as " + root);
  }
  // GPT-2 ties its head to the padded embedding (SGD, as the Llama's: AdamW
  // magnifies rounding on the near-zero gradients of the key biases).
  write("gpt2.yaml", std::string(kRun) + "model:\n  class_path: GPT2LMHeadModel\n  init_args: {vocab_size: 64, n_embd: "
                                         "32, n_layer: 2, n_head: 4, n_positions: 32}\noptimizer:\n  class_path: "
                                         "SGD\n  init_args: {lr: 0.5, momentum: 0.9}\n");
  fit("gpt2.yaml", "gpt2_one", plus(odd, {"--trainer.max_steps=6"}));
  fit("gpt2.yaml", "gpt2_tp2",
      plus(plus(odd, {"--trainer.max_steps=6", "--trainer.devices=2", kTensorParallel[0]}), whole_file));
  expectClose(losses("gpt2_tp2"), losses("gpt2_one"), "GPT-2's train_loss on 2 ranks");
  const auto gpt2 = readCheckpoint(checkpoint("gpt2_tp2", "last.ckpt"));
  EXPECT_EQ(gpt2.find("lm_head.weight"), nullptr) << "tied to transformer.wte";
  expectSameTensors(gpt2, readCheckpoint(checkpoint("gpt2_one", "last.ckpt")));
  // make_vocab_size_divisible_by is at least 1, as Megatron-LM's.
  write("zero.yaml", "model:\n  init_args:\n    make_vocab_size_divisible_by: 0\n");
  const RunResult zero = run({"fit", "-c", "llama.yaml", "-c", "zero.yaml"});
  EXPECT_EQ(zero.exit_code, 2) << zero.describe();
  EXPECT_THAT(zero.err, HasSubstr("zero.yaml:3:35: model.init_args.make_vocab_size_divisible_by: 0 is out of range; "
                                  "must be >= 1"));
}

// A distributed checkpoint's layout record (kDistributedCheckpoint) names
// its vocabulary's padding: 61 tokens on 2 ranks, Megatron-LM's 128 x 2 = 256
// rows, 195 of them padding. It resumes in the same layout and padded
// otherwise (make_vocab_size_divisible_by 3: 66 rows) to the losses of the
// run it was saved from; so does a record saved before it named the padding
// (the field removed), which each rank's file's shapes decide for.
TEST_F(ModelParallelTest, DistributedCheckpointRecordsItsVocabularyPadding) {
  namespace ckpt = core::checkpoint;
  const std::vector<std::string> tp2{"--model.init_args.vocab_size=61", "--data.init_args.vocab_size=61",
                                     "--trainer.devices=2", kTensorParallel[0]};
  write("llama.yaml", std::string(kRun) + kLlama);
  fit("llama.yaml", "tp2", tp2);
  const std::vector<double> whole_run = losses("tp2");
  ASSERT_EQ(whole_run.size(), 10u);
  const std::vector<double> rest(whole_run.begin() + 5, whole_run.end());
  const fs::path step5 = checkpoint("tp2", "epoch=0-step=5.ckpt");
  ckpt::Checkpoint main = readCheckpoint(step5);
  nlohmann::json layout = nlohmann::json::parse(main.meta(ckpt::kDistributedCheckpoint));
  EXPECT_EQ(layout.value("vocabulary_padding", std::int64_t{-1}), 195) << layout.dump();
  // The same checkpoint as its record was written before it named the padding.
  layout.erase("vocabulary_padding");
  main.metadata[ckpt::kDistributedCheckpoint] = layout.dump();
  const std::string old_format = (dir() / "old_format.ckpt").string();
  ckpt::writeSafetensorsFile(main, old_format);
  for (int rank : {0, 1}) fs::copy_file(ckpt::shardPath(step5.string(), rank), ckpt::shardPath(old_format, rank));
  const std::vector<std::string> by_3{"--model.init_args.make_vocab_size_divisible_by=3"};
  for (const auto& [root, args] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"same", {"--ckpt_path=" + step5.string()}},
           {"by_3", plus(by_3, {"--ckpt_path=" + step5.string()})},
           {"old_same", {"--ckpt_path=" + old_format}},
           {"old_by_3", plus(by_3, {"--ckpt_path=" + old_format})}}) {
    fit("llama.yaml", root, plus(tp2, args));
    expectClose(losses(root), rest, "steps 6-10 resumed as " + root);
  }
}

TEST_F(ModelParallelTest, LayoutsThatCannotWorkAreRefusedByName) {
  write("llama.yaml", std::string(kRun) + kLlama);
  RunResult r = run({"fit", "-c", "llama.yaml", "--trainer.devices=2", kTensorParallel[0],
                     "--trainer.strategy.init_args.data_parallel_size=2"});
  expectRefusedBeforeRanksStart(r);
  EXPECT_THAT(r.err, HasSubstr("error: trainer.strategy: the sizes data_parallel_size=2 and tensor_parallel_size=2 "
                               "multiplied should equal the world size (2 = trainer.devices 2 x trainer.num_nodes 1)"));
  r = run({"fit", "-c", "llama.yaml", "--trainer.devices=4", kTensorParallel[0], "--model.init_args.num_attention_heads=2",
           "--model.init_args.num_key_value_heads=2"});
  expectRefusedBeforeRanksStart(r);
  EXPECT_THAT(r.err, HasSubstr("num_attention_heads 2 cannot be split across 4 tensor-parallel ranks; choose a "
                               "tensor_parallel_size that divides it"));
}

// Pipeline parallelism: a 4-layer Llama, an optimizer step of 4
// micro-batches (accumulate_grad_batches) through the 1F1B schedule.
const std::vector<std::string> kFourLayers{"--model.init_args.num_hidden_layers=4",
                                           "--trainer.accumulate_grad_batches=4"};

// `base` with ModelParallelStrategy over `devices` ranks in stages of `tp`.
std::vector<std::string> pipeline(int devices, int tp, int pp, std::vector<std::string> base = kFourLayers) {
  base.insert(base.end(), {"--trainer.devices=" + std::to_string(devices), kTensorParallel[0],
                           "--trainer.strategy.init_args.tensor_parallel_size=" + std::to_string(tp),
                           "--trainer.strategy.init_args.pipeline_parallel_size=" + std::to_string(pp)});
  return base;
}


TEST_F(ModelParallelTest, PipelineStagesTrainAsOneDevice) {
  write("llama.yaml", std::string(kRun) + kLlama);
  const std::vector<std::string> steps{"--trainer.max_steps=6"};
  const std::vector<std::string> whole_file{"--trainer.strategy.init_args.save_distributed_checkpoint=false"};
  fit("llama.yaml", "one", plus(kFourLayers, steps));
  const std::vector<double> one = losses("one");
  EXPECT_EQ(one.size(), 6u);
  const auto one_ckpt = readCheckpoint(checkpoint("one", "last.ckpt"));
  // 2 stages of 2 layers; 2 stages of 2 tensor-parallel ranks; 4 stages of 1.
  for (const auto& [root, layout] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"pp2", pipeline(2, 1, 2)}, {"tp2pp2", pipeline(4, 2, 2)}, {"pp4", pipeline(4, 1, 4)}}) {
    fit("llama.yaml", root, plus(plus(layout, steps), whole_file));
    expectClose(losses(root), one, root + " train_loss");
    // The stages' parameters and optimizer state assembled in one file, as one device saves it.
    EXPECT_FALSE(fs::exists(checkpoint(root, "last.ckpt.rank0"))) << root;
    expectSameTensors(readCheckpoint(checkpoint(root, "last.ckpt")), one_ckpt);
  }
  // GPT-2: dropout in every layer, and the token embedding tied to the
  // output head on the first and the last stage.
  write("gpt2.yaml", std::string(kRun) + kGpt2);
  const std::vector<std::string> gpt2{"--model.init_args.n_layer=4", "--trainer.accumulate_grad_batches=4",
                                      "--trainer.max_steps=6"};
  fit("gpt2.yaml", "gpt2_one", gpt2);
  fit("gpt2.yaml", "gpt2_pp2", pipeline(2, 1, 2, gpt2));
  expectClose(losses("gpt2_pp2"), losses("gpt2_one"), "GPT-2 train_loss");
}

// Interleaved 1F1B: an 8-layer Llama cut into model chunks of 2 layers (2
// stages of 2 chunks: stage 0 holds layers 0-1 and 4-5) or of 1 layer (4
// stages of 2), 4 micro-batches a step, trains one device's losses, weights
// and optimizer state, as the stages without chunks do; GPT-2 with dropout
// and its tied embedding too.
const std::vector<std::string> kEightLayers{"--model.init_args.num_hidden_layers=8",
                                            "--trainer.accumulate_grad_batches=4"};
const std::string kTwoChunks = "--trainer.strategy.init_args.virtual_pipeline_size=2";

TEST_F(ModelParallelTest, InterleavedStagesTrainAsOneDevice) {
  write("llama.yaml", std::string(kRun) + kLlama);
  const std::vector<std::string> steps{"--trainer.max_steps=6",
                                       "--trainer.strategy.init_args.save_distributed_checkpoint=false"};
  fit("llama.yaml", "one", plus(kEightLayers, {"--trainer.max_steps=6"}));
  const std::vector<double> one = losses("one");
  EXPECT_EQ(one.size(), 6u);
  const auto one_ckpt = readCheckpoint(checkpoint("one", "last.ckpt"));
  const auto one_order = nlohmann::json::parse(one_ckpt.meta(core::checkpoint::kOptimizerParams));
  for (const auto& [root, layout] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"pp2", pipeline(2, 1, 2, kEightLayers)},
           {"pp2vp2", plus(pipeline(2, 1, 2, kEightLayers), {kTwoChunks})},
           {"pp4vp2", plus(pipeline(4, 1, 4, kEightLayers), {kTwoChunks})},
           {"pp2lpv2", plus(pipeline(2, 1, 2, kEightLayers), {"--trainer.strategy.init_args.layers_per_virtual_stage=2"})}}) {
    SCOPED_TRACE(root);
    fit("llama.yaml", root, plus(layout, steps));
    expectClose(losses(root), one, root + " train_loss");
    expectSameTensors(withOptimizerOrder(readCheckpoint(checkpoint(root, "last.ckpt")), one_order), one_ckpt);
  }
  write("gpt2.yaml", std::string(kRun) + kGpt2);
  const std::vector<std::string> gpt2{"--model.init_args.n_layer=4", "--trainer.accumulate_grad_batches=4",
                                      "--trainer.max_steps=6"};
  fit("gpt2.yaml", "gpt2_one", gpt2);
  fit("gpt2.yaml", "gpt2_pp2vp2", plus(pipeline(2, 1, 2, gpt2), {kTwoChunks}));
  expectClose(losses("gpt2_pp2vp2"), losses("gpt2_one"), "GPT-2 train_loss");
}

// Which layers a stage holds is a layout detail: an interleaved run's
// checkpoint resumes on one device, in stages without chunks and
// interleaved again; one device's resumes interleaved; it consolidates to
// one device's file. An epoch's short last step (3 of 4 micro-batches: 10
// batches, steps of 4) runs after the whole groups.
TEST_F(ModelParallelTest, InterleavedCheckpointResumesInAnotherLayout) {
  write("llama.yaml", std::string(kRun) + kLlama);
  const std::vector<std::string> eight = plus(kEightLayers, {"--data.init_args.num_samples=56"});
  fit("llama.yaml", "one", eight);
  const std::vector<double> whole_run = losses("one");
  ASSERT_EQ(whole_run.size(), 10u);
  const std::vector<double> rest(whole_run.begin() + 5, whole_run.end());
  fit("llama.yaml", "pp2vp2", plus(plus(pipeline(2, 1, 2, eight), {kTwoChunks}), {"--trainer.max_steps=5"}));
  const fs::path step5 = checkpoint("pp2vp2", "last.ckpt");
  EXPECT_TRUE(fs::exists(step5.string() + ".rank1"));
  for (const auto& [root, layout] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"device", eight},
           {"pp2", pipeline(2, 1, 2, eight)},
           {"pp2vp2_again", plus(pipeline(2, 1, 2, eight), {kTwoChunks})},
           {"pp4vp2", plus(pipeline(4, 1, 4, eight), {kTwoChunks})}}) {
    fit("llama.yaml", root, plus(layout, {"--ckpt_path=" + step5.string()}));
    expectClose(losses(root), rest, "steps 6-10 resumed as " + root);
  }
  const fs::path one_step5 = checkpoint("one", "epoch=2-step=5.ckpt");
  ASSERT_TRUE(fs::exists(one_step5));
  fit("llama.yaml", "from_one", plus(plus(pipeline(2, 1, 2, eight), {kTwoChunks}), {"--ckpt_path=" + one_step5.string()}));
  expectClose(losses("from_one"), rest, "one device's step 5 resumed interleaved");
  const RunResult c = run({"consolidate", step5.string(), "whole.ckpt"});
  ASSERT_EQ(c.exit_code, 0) << c.describe();
  const auto one_ckpt = readCheckpoint(one_step5);
  expectSameTensors(
      withOptimizerOrder(readCheckpoint(dir() / "whole.ckpt"),
                         nlohmann::json::parse(one_ckpt.meta(core::checkpoint::kOptimizerParams))),
      one_ckpt);
}

// Virtual stages the run cannot take are refused where they are set.
TEST_F(ModelParallelTest, VirtualStagesThatCannotWorkAreRefusedWhereTheyAreSet) {
  write("llama.yaml", std::string(kRun) + kLlama);
  const auto refused = [&](const std::string& strategy_yaml, std::vector<std::string> args, const std::string& message) {
    write("layout.yaml", "trainer:\n  strategy:\n    class_path: ModelParallelStrategy\n    init_args:\n" + strategy_yaml);
    args.insert(args.begin(), {"fit", "-c", "llama.yaml", "-c", "layout.yaml", "--trainer.default_root_dir=refused"});
    const RunResult r = run(args);
    expectRefusedBeforeRanksStart(r);
    EXPECT_THAT(r.err, HasSubstr(message));
  };
  const std::vector<std::string> two{"--trainer.devices=2", "--model.init_args.num_hidden_layers=4"};
  const std::string p2 = "      tensor_parallel_size: 1\n      pipeline_parallel_size: 2\n";
  refused(p2 + "      virtual_pipeline_size: 2\n      layers_per_virtual_stage: 1\n", plus(two, {"--trainer.accumulate_grad_batches=2"}),
          "error: layout.yaml:8:33: trainer.strategy.init_args.layers_per_virtual_stage: give virtual_pipeline_size "
          "(2) or layers_per_virtual_stage (1), not both: one sets the other (virtual_pipeline_size = decoder layers "
          "/ (pipeline_parallel_size x layers_per_virtual_stage))");
  refused("      tensor_parallel_size: 1\n      virtual_pipeline_size: 2\n", {"--trainer.devices=1"},
          "error: layout.yaml:6:30: trainer.strategy.init_args.virtual_pipeline_size: virtual pipeline stages "
          "interleave the model chunks of several pipeline stages; set pipeline_parallel_size to 2 or more, or leave "
          "virtual_pipeline_size unset");
  refused(p2 + "      virtual_pipeline_size: 2\n", plus(two, {"--trainer.accumulate_grad_batches=3"}),
          "error: layout.yaml:7:30: trainer.strategy.init_args.virtual_pipeline_size: the interleaved schedule runs "
          "micro-batches in groups of pipeline_parallel_size (as Megatron-LM's): trainer.accumulate_grad_batches 3 is "
          "not a multiple of 2; set it to 2 or 4");
  refused(p2 + "      virtual_pipeline_size: 3\n", plus(two, {"--trainer.accumulate_grad_batches=2"}),
          "error: layout.yaml:7:30: trainer.strategy.init_args.virtual_pipeline_size: 2 pipeline stages x 3 virtual "
          "stages make 6 model chunks of at least one decoder layer each, but LlamaForCausalLM has 4 "
          "(num_hidden_layers); use at most 2");
  refused(p2 + "      layers_per_virtual_stage: 3\n", plus(two, {"--trainer.accumulate_grad_batches=2"}),
          "error: layout.yaml:7:33: trainer.strategy.init_args.layers_per_virtual_stage: 2 pipeline stages of model "
          "chunks of 3 decoder layers do not divide LlamaForCausalLM's 4 (num_hidden_layers); use 1, 2");
  refused(p2 + "      virtual_pipeline_size: 2\n      pipeline_layers: [1, 1, 2]\n",
          plus(two, {"--trainer.accumulate_grad_batches=2"}),
          "error: trainer.strategy.init_args.pipeline_layers: 3 counts for 4 model chunks (pipeline_parallel_size 2 x "
          "virtual_pipeline_size 2); give one count of decoder layers per chunk, in the model's order");
}

TEST_F(ModelParallelTest, PipelineCheckpointResumesInAnotherLayout) {
  write("llama.yaml", std::string(kRun) + kLlama);
  fit("llama.yaml", "one", kFourLayers);
  const std::vector<double> whole_run = losses("one");
  ASSERT_EQ(whole_run.size(), 10u);
  const std::vector<double> rest(whole_run.begin() + 5, whole_run.end());
  // 5 steps in 2 stages, each rank writing its own part.
  fit("llama.yaml", "pp2", plus(pipeline(2, 1, 2), {"--trainer.max_steps=5"}));
  const fs::path step5 = checkpoint("pp2", "last.ckpt");
  EXPECT_TRUE(fs::exists(step5.string() + ".rank1"));
  for (const auto& [root, layout] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"pp2_again", pipeline(2, 1, 2)},
           {"tp2", plus(kFourLayers, {"--trainer.devices=2", kTensorParallel[0]})},
           {"device", kFourLayers},
           {"tp2pp2", pipeline(4, 2, 2)}}) {
    fit("llama.yaml", root, plus(layout, {"--ckpt_path=" + step5.string()}));
    expectClose(losses(root), rest, "steps 6-10 resumed as " + root);
  }
  // One device's checkpoint resumes in stages.
  fit("llama.yaml", "from_one",
      plus(pipeline(2, 1, 2), {"--ckpt_path=" + checkpoint("one", "epoch=2-step=5.ckpt").string()}));
  expectClose(losses("from_one"), rest, "one device's step 5 resumed in 2 stages");
  // consolidate: one file, the one a device saves at step 5.
  const RunResult c = run({"consolidate", step5.string(), "whole.ckpt"});
  ASSERT_EQ(c.exit_code, 0) << c.describe();
  expectSameTensors(readCheckpoint(dir() / "whole.ckpt"), readCheckpoint(checkpoint("one", "epoch=2-step=5.ckpt")));
}

// ZeRO-1 over the data-parallel copies: each steps its part of the
// optimizer; stages x copies and tensor-parallel ranks x copies train as
// data parallelism does, and their checkpoints hold the whole state.
TEST_F(ModelParallelTest, ZeRO1OverDataParallelCopiesTrainsAsDataParallel) {
  write("llama.yaml", std::string(kRun) + kLlama);
  fit("llama.yaml", "dp2", plus(kFourLayers, {"--trainer.max_steps=6", "--trainer.devices=2", "--trainer.strategy=hpu_parallel"}));
  const auto dp2_ckpt = readCheckpoint(checkpoint("dp2", "last.ckpt"));
  const std::vector<std::string> zero{"--trainer.max_steps=6", "--trainer.strategy.init_args.zero_stage=1",
                                      "--trainer.strategy.init_args.data_parallel_size=2",
                                      "--trainer.strategy.init_args.save_distributed_checkpoint=false"};
  for (const auto& [root, layout] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"pp2dp2", pipeline(4, 1, 2)}, {"tp2dp2", pipeline(4, 2, 1)}}) {
    fit("llama.yaml", root, plus(layout, zero));
    expectClose(losses(root), losses("dp2"), root + " train_loss");
    expectSameTensors(readCheckpoint(checkpoint(root, "last.ckpt")), dp2_ckpt);
  }
  // A distributed checkpoint of ZeRO-1 resumes without it, and the other way.
  fit("llama.yaml", "zero_parts", plus(pipeline(4, 1, 2), {"--trainer.max_steps=3", "--trainer.strategy.init_args.zero_stage=1"}));
  fit("llama.yaml", "resumed_dp2",
      plus(kFourLayers, {"--trainer.max_steps=6", "--trainer.devices=2", "--trainer.strategy=hpu_parallel",
                         "--ckpt_path=" + checkpoint("zero_parts", "last.ckpt").string()}));
  const std::vector<double> all = losses("dp2");
  expectClose(losses("resumed_dp2"), std::vector<double>(all.begin() + 3, all.end()), "ZeRO-1 stages resumed as hpu_parallel");
  fit("llama.yaml", "resumed_zero",
      plus(pipeline(4, 2, 1), {"--trainer.max_steps=6", "--trainer.strategy.init_args.zero_stage=1",
                               "--trainer.strategy.init_args.data_parallel_size=2",
                               "--ckpt_path=" + checkpoint("zero_parts", "last.ckpt").string()}));
  expectClose(losses("resumed_zero"), std::vector<double>(all.begin() + 3, all.end()),
              "ZeRO-1 stages resumed as ZeRO-1 tensor parallel");
}

// ZeRO-1 under bf16-mixed is Megatron-LM's distributed optimizer, as DeepSpeed
// runs ZeRO-1 in bf16 mode: a bf16 model stepped through fp32 masters in the
// optimizer state, gradients reduced in fp32. It trains as DeepSpeed's ZeRO-1
// with fp32 gradient communication on the same 2 ranks: the first loss equal
// (the same bf16 weights; the fp32 model under autocast gives another), the
// rest within bf16 rounding of the weights an update may flip (observed:
// 1e-5 relative after 6 steps). The checkpoint holds the bf16 model and the
// gathered masters.
TEST_F(ModelParallelTest, ZeRO1UnderBf16HoldsABf16ModelWithFp32MastersAsDeepSpeed) {
  write("llama.yaml", std::string(kRun) + kLlama);
  const std::vector<std::string> bf16{"--trainer.max_steps=6", "--trainer.devices=2", "--trainer.precision=bf16-mixed"};
  fit("llama.yaml", "deepspeed",
      plus(bf16, {"--trainer.strategy=lightning_habana.pytorch.strategies.HPUDeepSpeedStrategy",
                  "--trainer.strategy.stage=1",
                  "--trainer.strategy.config={communication_data_type: fp32, zero_allow_untested_optimizer: true}"}));
  const std::vector<std::string> dp2{kTensorParallel[0], "--trainer.strategy.init_args.tensor_parallel_size=1",
                                     "--trainer.strategy.init_args.data_parallel_size=2",
                                     "--trainer.strategy.init_args.save_distributed_checkpoint=false"};
  fit("llama.yaml", "zero1", plus(plus(bf16, dp2), {"--trainer.strategy.init_args.zero_stage=1"}));
  fit("llama.yaml", "autocast", plus(bf16, dp2));
  const std::vector<double> want = losses("deepspeed"), got = losses("zero1");
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(got.front(), want.front());
  EXPECT_NE(losses("autocast").front(), want.front()) << "the fp32 model under autocast";
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4 * want[i]) << "step " << i;
  const core::checkpoint::Checkpoint c = readCheckpoint(checkpoint("zero1", "last.ckpt"));
  int weights = 0;
  for (const auto& t : c.tensors)
    if (t.name.starts_with("model.")) {
      ++weights;
      EXPECT_EQ(t.dtype, device::DType::kBFloat16) << t.name;
    }
  EXPECT_GT(weights, 0);
  const auto* master = c.find("optimizer.master.0");
  ASSERT_NE(master, nullptr);
  EXPECT_EQ(master->dtype, device::DType::kFloat32);
  // Resumed from step 5, the last step is the uninterrupted run's, bit for bit.
  fit("llama.yaml", "resumed",
      plus(plus(bf16, dp2), {"--trainer.strategy.init_args.zero_stage=1",
                             "--ckpt_path=" + checkpoint("zero1", "epoch=1-step=5.ckpt").string()}));
  EXPECT_EQ(losses("resumed"), std::vector<double>{got.back()});
}

// Stages across nodes, as pipelines run: 2 nodes of one device each
// (scripts/local-cluster.sh, tcp:// between them) train as one device.
TEST_F(ModelParallelTest, PipelineStagesOnTwoNodesTrainAsOneDevice) {
  write("llama.yaml", std::string(kRun) + kLlama);
  const std::vector<std::string> steps{"--trainer.max_steps=4"};
  fit("llama.yaml", "one", plus(kFourLayers, steps));
  std::vector<std::string> args{"--nodes", "2", "--devices", "1", "--", "fit", "-c", (dir() / "llama.yaml").string(),
                                "--trainer.default_root_dir=" + (dir() / "nodes").string(), kTensorParallel[0],
                                "--trainer.strategy.init_args.tensor_parallel_size=1",
                                "--trainer.strategy.init_args.pipeline_parallel_size=2"};
  args.insert(args.end(), kFourLayers.begin(), kFourLayers.end());
  args.push_back(steps.front());
  env()["HPU_LOG_LEVEL"] = "info";  // to see the layout
  const RunResult r = runScript("local-cluster.sh", args, std::chrono::seconds(120));
  ASSERT_FALSE(r.timed_out) << r.describe();
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("1 data-parallel x 2 pipeline stages x 1 tensor-parallel ranks"));
  expectClose(losses("nodes"), losses("one"), "2 stages on 2 nodes");
}

// HPUProfiler's trace of the first optimizer step (its fourth batch, where
// the micro-batches run) shows the schedule: stage 0 runs two forwards before
// its first backward (1F1B's warm-up on 2 stages), the last stage
// alternates, and each waits for the other (the bubble).
TEST_F(ModelParallelTest, PipelineScheduleAndItsBubbleShowInTheProfilerTrace) {
  write("llama.yaml", std::string(kRun) + kLlama);
  fit("llama.yaml", "traced",
      plus(pipeline(2, 1, 2),
           {"--trainer.max_steps=2", "--trainer.limit_val_batches=0", "--trainer.profiler=HPUProfiler",
            "--trainer.profiler.dirpath=traces",
            "--trainer.profiler.schedule={skip_first: 3, wait: 0, warmup: 0, active: 1, repeat: 1}"}));
  const auto phases = [&](int rank) {
    std::vector<std::string> out;
    double waited = 0;
    const auto doc = nlohmann::json::parse(read("traces/rank" + std::to_string(rank) + "-fit.pt.trace.json"));
    std::vector<std::pair<double, std::string>> events;
    for (const auto& e : doc["traceEvents"]) {
      const std::string name = e.value("name", "");
      if (name == "pipeline_forward" || name == "pipeline_backward") events.emplace_back(e["ts"], name.substr(9, 1));
      if (name.starts_with("pipeline_recv_")) waited += e["dur"].get<double>();
    }
    std::sort(events.begin(), events.end());
    for (const auto& [ts, name] : events) out.push_back(name);
    EXPECT_GT(waited, 0.0) << "rank " << rank << " never waited for its neighbour";
    return out;
  };
  EXPECT_THAT(phases(0), ::testing::ElementsAre("f", "f", "b", "f", "b", "f", "b", "b"));
  EXPECT_THAT(phases(1), ::testing::ElementsAre("f", "b", "f", "b", "f", "b", "f", "b"));
}

// LoRA under tensor and pipeline parallelism: the adapters split with their
// base layers (B as a column-parallel layer's rows, A as a row-parallel
// one's columns, the other whole), grouped-query attention's key/value
// pieces and sequence parallelism included, and a stage adapts its own
// layers. Every layout trains one device's losses and adapters (dropout
// masks included), its checkpoint consolidates to one device's, and export
// writes the PEFT adapter directory from the distributed checkpoint.
TEST_F(ModelParallelTest, LoraAdaptersSplitWithTheirLayersAndTrainAsOneDevice) {
  write("llama.yaml", std::string(kRun) + kLlama);
  const std::vector<std::string> lora{
      "--model.init_args.lora={r: 4, lora_alpha: 8, lora_dropout: 0.2, target_modules: [q_proj, k_proj, v_proj, "
      "o_proj, gate_proj, up_proj, down_proj]}"};
  const auto sameAsOneDevice = [&](const std::string& root, const std::string& one) {
    expectClose(losses(root), losses(one), root);
    const fs::path whole = dir() / (root + ".ckpt");
    ASSERT_EQ(run({"consolidate", checkpoint(root, "last.ckpt").string(), whole.string()}).exit_code, 0) << root;
    expectSameTensors(readCheckpoint(whole), readCheckpoint(checkpoint(one, "last.ckpt")));
  };
  fit("llama.yaml", "one", lora);
  const std::string sequence_parallel = "--trainer.strategy.init_args.sequence_parallel=true";
  for (const auto& [root, layout] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"tp2", {"--trainer.devices=2", kTensorParallel[0]}},
           {"tp2_sequence", {"--trainer.devices=2", kTensorParallel[0], sequence_parallel}},
           {"tp4_kv_pieces", {"--trainer.devices=4", kTensorParallel[0]}}}) {
    SCOPED_TRACE(root);
    fit("llama.yaml", root, plus(lora, layout));
    sameAsOneDevice(root, "one");
  }
  const RunResult exported = run({"export", "--ckpt_path", checkpoint("tp2", "last.ckpt").string(), "--output",
                                  (dir() / "adapter").string(), "--adapter"});
  ASSERT_EQ(exported.exit_code, 0) << exported.describe();
  EXPECT_TRUE(fs::exists(dir() / "adapter" / "adapter_model.safetensors"));

  fit("llama.yaml", "one_four_layers", plus(kFourLayers, lora));
  for (const auto& [root, layout] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"pp2", pipeline(2, 1, 2, plus(kFourLayers, lora))}, {"tp2_pp2", pipeline(4, 2, 2, plus(kFourLayers, lora))}}) {
    SCOPED_TRACE(root);
    fit("llama.yaml", root, layout);
    sameAsOneDevice(root, "one_four_layers");
  }
}

// Targets that only the last stage holds: the first stage trains nothing
// and still passes gradients through; targets no stage holds are refused
// as on one device.
TEST_F(ModelParallelTest, LoraTargetsOfOneStageTrainAsOneDevice) {
  write("llama.yaml", std::string(kRun) + kLlama);
  const std::vector<std::string> lora{"--model.init_args.lora={r: 2, target_modules: [lm_head]}"};
  fit("llama.yaml", "one", plus(kFourLayers, lora));
  fit("llama.yaml", "pp2", pipeline(2, 1, 2, plus(kFourLayers, lora)));
  expectClose(losses("pp2"), losses("one"), "pp2");
  const RunResult r = run(plus({"fit", "-c", "llama.yaml", "--trainer.default_root_dir=none"},
                               pipeline(2, 1, 2, plus(kFourLayers, {"--model.init_args.lora={target_modules: [qproj]}"}))));
  expectRefusedBeforeRanksStart(r);
  EXPECT_THAT(r.err, HasSubstr("model.init_args.lora.target_modules: [qproj] matches no layer of the model"));
}

TEST_F(ModelParallelTest, PipelineLayoutsThatCannotWorkAreRefusedByName) {
  write("llama.yaml", std::string(kRun) + kLlama);
  const auto refused = [&](std::vector<std::string> args, const std::string& message) {
    args.insert(args.begin(), {"fit", "-c", "llama.yaml", "--trainer.default_root_dir=refused"});
    const RunResult r = run(args);
    expectRefusedBeforeRanksStart(r);
    EXPECT_THAT(r.err, HasSubstr(message));
  };
  refused(pipeline(3, 1, 3, {}),
          "error: trainer.strategy.init_args.pipeline_parallel_size: 3 stages, but LlamaForCausalLM has only 2 "
          "decoder layers (num_hidden_layers); use at most 2 stages");
  refused(pipeline(2, 2, 2, {}),
          "error: trainer.strategy: the sizes data_parallel_size=1, tensor_parallel_size=2 and "
          "pipeline_parallel_size=2 multiplied should equal the world size (2 = trainer.devices 2 x "
          "trainer.num_nodes 1)");
  refused(plus(pipeline(2, 1, 2, {}), {"--trainer.strategy.init_args.pipeline_layers=[1, 2]"}),
          "error: trainer.strategy.init_args.pipeline_layers: [1, 2] does not give each of the 2 pipeline stages at "
          "least one of LlamaForCausalLM's 2 decoder layers");
  refused(plus(pipeline(2, 1, 2, {}), {"--model=BoringModel", "--data=RandomDataModule"}),
          "error: trainer.strategy.init_args.pipeline_parallel_size=2: BoringModel has no decoder layers to split into "
          "pipeline stages; pipeline parallelism runs the decoder language models (LlamaForCausalLM, "
          "GPT2LMHeadModel, AutoModelForCausalLM, ...)");
  std::vector<std::string> predict = pipeline(2, 1, 2, {});
  predict.insert(predict.begin(), {"predict", "-c", "llama.yaml", "--model.init_args.prompt=a"});
  const RunResult r = run(predict);
  expectRefusedBeforeRanksStart(r);
  EXPECT_THAT(r.err, HasSubstr("error: predict with trainer.strategy.init_args.pipeline_parallel_size=2: generation "
                               "runs every layer on each rank; predict with tensor_parallel_size (and "
                               "pipeline_parallel_size 1), which reads this run's checkpoints as well"));
}

}  // namespace
}  // namespace hpu::cli::testing
