// Language models through the binary: training on text (losses in nats,
// bits per byte), checkpoints under Hugging Face's names, generation from a
// trained checkpoint, every precision, fp8 inference, and every strategy
// training to one device's weights.
#include <gmock/gmock.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "train_support.h"

namespace hpu::cli::testing {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

// A tiny Llama on a small text; batches of 8 blocks of 16 bytes, SGD (so
// that runs split over ranks agree to summation order), no progress bar.
constexpr const char* kConfig = R"(seed_everything: 3
model:
  class_path: LlamaForCausalLM
  init_args:
    hidden_size: 32
    intermediate_size: 48
    num_hidden_layers: 2
    num_attention_heads: 4
    num_key_value_heads: 2
    max_position_embeddings: 64
data:
  class_path: TextDataModule
  init_args:
    path: corpus.txt
    block_size: 16
    batch_size: 8
    val_split: 0.2
optimizer:
  class_path: SGD
  init_args: {lr: 0.1}
trainer:
  devices: 1
  max_steps: 6
  limit_val_batches: 2
  num_sanity_val_steps: 0
  log_every_n_steps: 2
  enable_progress_bar: false
  enable_model_summary: false
  callbacks: [{class_path: ModelCheckpoint, init_args: {save_last: true}}]
)";

class LanguageModelTest : public HpuTrainTest {
 protected:
  void SetUp() override {
    std::string text;
    for (int i = 0; i < 120; ++i) text += "the quick brown fox " + std::to_string(i % 7) + " jumps over the lazy dog. ";
    write("corpus.txt", text);
    write("lm.yaml", kConfig);
  }
  RunResult lm(const std::string& subcommand, std::vector<std::string> args) {
    args.insert(args.begin(), {subcommand, "-c", "lm.yaml"});
    return run(args);
  }
  core::checkpoint::Checkpoint last(const std::string& root = ".") const {
    return readCheckpoint(dir() / root / "lightning_logs/version_0/checkpoints/last.ckpt");
  }
};

TEST_F(LanguageModelTest, FitLogsNatsPerTokenAndBitsPerByteAndSavesHuggingFaceNames) {
  const RunResult r = lm("fit", {"--trainer.max_steps=12", "--trainer.val_check_interval=12"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const CsvTable m = readCsv(dir() / "lightning_logs/version_0/metrics.csv");
  const double first = m.valueAt("train_loss", 1), latest = m.valueAt("train_loss", 11);
  EXPECT_NEAR(first, std::log(256.0), 0.5) << "an untrained model is near uniform over 256 bytes";
  EXPECT_LT(latest, first - 0.5) << "it learns";
  EXPECT_NEAR(m.valueAt("val_bpb", 11), m.valueAt("val_loss", 11) / std::log(2.0), 1e-9);
  std::set<std::string> names;
  for (const auto& t : last().tensors) names.insert(t.name);
  for (const char* name :
       {"model.embed_tokens.weight", "model.layers.1.self_attn.k_proj.weight", "model.layers.0.mlp.gate_proj.weight",
        "model.layers.0.post_attention_layernorm.weight", "model.norm.weight", "lm_head.weight"})
    EXPECT_TRUE(names.count(name)) << name;
  EXPECT_FALSE(names.count("model.model.embed_tokens.weight")) << "no prefix beyond Hugging Face's names";
}

TEST_F(LanguageModelTest, PredictContinuesPromptsWithTheTrainedWeightsAndWritesJsonLines) {
  ASSERT_EQ(lm("fit", {"--trainer.max_steps=30", "--optimizer.init_args.lr=0.3"}).exit_code, 0);
  write("prompts.txt", "the quick\nover the\n");
  const auto predict = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"--trainer.logger=false", "--trainer.default_root_dir=pred",
                                  "--model.max_new_tokens=12"};
    args.insert(args.end(), extra.begin(), extra.end());
    const RunResult r = lm("predict", args);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    std::vector<nlohmann::json> lines;
    std::istringstream in(read("pred/predictions.jsonl"));
    for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
    return std::pair{r, lines};
  };
  const auto [trained, lines] = predict({"--ckpt_path=lightning_logs/version_0/checkpoints/last.ckpt",
                                         "--model.prompt=the lazy", "--model.prompts=prompts.txt"});
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["prompt"], "the lazy");
  EXPECT_EQ(lines[2]["prompt"], "over the");
  for (const auto& l : lines) {
    EXPECT_EQ(l["token_ids"].size(), 12u);
    std::string decoded;
    for (const auto& id : l["token_ids"]) decoded += static_cast<char>(id.get<int>());
    EXPECT_EQ(l["completion"].get<std::string>(), decoded) << "byte tokens decode to the completion";
    EXPECT_THAT(trained.out, HasSubstr(l["prompt"].get<std::string>() + l["completion"].get<std::string>()));
  }
  EXPECT_THAT(trained.out, HasSubstr("wrote 3 predictions to pred/predictions.jsonl"));
  // Greedy: the same again; untrained weights continue otherwise.
  EXPECT_EQ(predict({"--ckpt_path=lightning_logs/version_0/checkpoints/last.ckpt", "--model.prompt=the lazy",
                     "--model.prompts=prompts.txt"})
                .second,
            lines);
  EXPECT_NE(predict({"--model.prompt=the lazy", "--model.prompts=prompts.txt"}).second[0]["completion"],
            lines[0]["completion"]);
  // No prompt: told what to give.
  const RunResult none = lm("predict", {"--trainer.logger=false"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("LlamaForCausalLM generates from prompts: give model.init_args.prompt"));
}

TEST_F(LanguageModelTest, EveryPrecisionTrainsIt) {
  for (const char* precision : {"bf16-mixed", "bf16-true", "16-mixed", "fp8"}) {
    SCOPED_TRACE(precision);
    const std::string root = std::string("p_") + precision;
    const RunResult r = lm("fit", {std::string("--trainer.precision=") + precision,
                                   "--trainer.default_root_dir=" + root, "--trainer.max_steps=8"});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    const CsvTable m = readCsv(dir() / root / "lightning_logs/version_0/metrics.csv");
    EXPECT_LT(m.valueAt("train_loss", 7), m.valueAt("train_loss", 1)) << "it learns";
  }
}

TEST_F(LanguageModelTest, Fp8InferenceMeasuresThenQuantizesIt) {
  ASSERT_EQ(lm("fit", {"--trainer.max_steps=10"}).exit_code, 0);
  const std::vector<std::string> common{"--ckpt_path=lightning_logs/version_0/checkpoints/last.ckpt",
                                        "--model.prompt=the quick", "--model.max_new_tokens=8",
                                        "--trainer.logger=false", "--trainer.precision=fp8"};
  auto measure = common, quantize = common;
  measure.insert(measure.end(), {"--trainer.plugins+=HPUPrecisionPlugin", "--trainer.plugins.precision=fp8",
                                 "--trainer.plugins.inference=true", "--trainer.plugins.quant=false"});
  quantize.insert(quantize.end(), {"--trainer.plugins+=HPUPrecisionPlugin", "--trainer.plugins.precision=fp8",
                                   "--trainer.plugins.inference=true", "--trainer.plugins.quant=true"});
  for (auto* args : {&measure, &quantize}) {
    auto it = std::find(args->begin(), args->end(), "--trainer.precision=fp8");
    args->erase(it);
  }
  const RunResult m = lm("predict", measure);
  ASSERT_EQ(m.exit_code, 0) << m.describe();
  const auto stats = nlohmann::json::parse(read("hqt_output/measure.json"));
  EXPECT_TRUE(stats["Nodes"].contains("model.layers.0.self_attn.q_proj"));
  EXPECT_TRUE(stats["Nodes"].contains("model.layers.1.mlp.down_proj"));
  EXPECT_FALSE(stats["Nodes"].contains("lm_head")) << "the output projection is not converted";
  const RunResult q = lm("predict", quantize);
  ASSERT_EQ(q.exit_code, 0) << q.describe();
  EXPECT_THAT(q.out, HasSubstr("wrote 1 predictions"));
}

TEST_F(LanguageModelTest, ASequentialOfLayersTrainsOnTextAsANextTokenModel) {
  write("seq.yaml", R"(model:
  class_path: Sequential
  init_args:
    lr: 0.01
    layers:
      - {class_path: Embedding, init_args: {num_embeddings: 256, embedding_dim: 32}}
      - {class_path: Residual, init_args: {layers: [RMSNorm, {class_path: SelfAttention, init_args: {num_heads: 4, rope_theta: 10000.0}}]}}
      - {class_path: Residual, init_args: {layers: [RMSNorm, {class_path: Linear, init_args: {out_features: 64}}, SwiGLU, {class_path: Linear, init_args: {out_features: 32}}]}}
      - RMSNorm
      - {class_path: Linear, init_args: {out_features: 256}}
)");
  const RunResult r = run({"fit", "-c", "lm.yaml", "-c", "seq.yaml", "--optimizer=null", "--trainer.max_steps=12",
                           "--trainer.val_check_interval=12"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const CsvTable m = readCsv(dir() / "lightning_logs/version_0/metrics.csv");
  EXPECT_LT(m.valueAt("train_loss", 11), m.valueAt("train_loss", 1) - 0.5) << "it learns the next byte";
  const double acc = m.valueAt("val_acc", 11);
  EXPECT_GT(acc, 1.0 / 256) << "next-token accuracy, better than chance";
  EXPECT_LE(acc, 1.0);
}

// Attention keeps no [T, T] scores: a step's peak device memory (what
// DeviceStatsMonitor logs) grows linearly with the sequence length.
TEST_F(LanguageModelTest, DeviceStatsShowMemoryLinearInTheSequenceLength) {
  std::string text;
  for (int i = 0; i < 400; ++i) text += "a longer text so that blocks of 256 bytes fit " + std::to_string(i) + ". ";
  write("corpus.txt", text);
  std::vector<double> peak;
  for (int t : {64, 128, 256}) {
    const std::string root = "t" + std::to_string(t);
    const RunResult r =
        lm("fit", {"--trainer.default_root_dir=" + root, "--data.init_args.block_size=" + std::to_string(t),
                   "--model.init_args.max_position_embeddings=256", "--data.init_args.batch_size=2",
                   "--trainer.max_steps=2", "--trainer.log_every_n_steps=1", "--trainer.callbacks=[DeviceStatsMonitor]",
                   "--trainer.limit_val_batches=0"});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    peak.push_back(readCsv(dir() / root / "lightning_logs/version_0/metrics.csv")
                       .valueAt("DeviceStatsMonitor.on_train_batch_end/MaxInUse", 1));
  }
  // Each doubling of T adds twice what the one before added (linear); scores
  // of [T, T] per head would add four times as much.
  const double first = peak[1] - peak[0], second = peak[2] - peak[1];
  EXPECT_GT(first, 0.0);
  EXPECT_NEAR(second / first, 2.0, 0.1) << "peaks " << peak[0] << ", " << peak[1] << ", " << peak[2];
}

// Every strategy on 2 ranks, each with half of the global batch of 8 (or
// two micro-batches of 2: ZeRO-2/3 reduce-scatter each into the gradient
// shards), ends where one device does: weights within float summation order.
class LanguageModelStrategies : public LanguageModelTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(LanguageModelStrategies, TrainToOneDevicesWeights) {
  ASSERT_EQ(lm("fit", {"--trainer.default_root_dir=one"}).exit_code, 0);
  std::vector<std::string> args{"--trainer.default_root_dir=two", "--trainer.devices=2"};
  if (GetParam().ends_with("_accumulation"))
    args.insert(args.end(), {"--data.init_args.batch_size=2", "--trainer.accumulate_grad_batches=2"});
  else
    args.push_back("--data.init_args.batch_size=4");
  if (GetParam() == "hpu_parallel") {
    args.push_back("--trainer.strategy=hpu_parallel");
  } else {  // ZeRO with plain SGD: DeepSpeed wants to be told
    const std::string stage = GetParam().substr(0, 1);
    args.insert(args.end(), {"--trainer.strategy=HPUDeepSpeedStrategy", "--trainer.strategy.stage=" + stage,
                             "--trainer.strategy.config={zero_allow_untested_optimizer: true}"});
    if (GetParam() == "3_cpu_checkpointing")  // each decoder layer recomputed from its input kept in host memory
      args.insert(args.end(),
                  {"--model.init_args.gradient_checkpointing=true", "--trainer.strategy.cpu_checkpointing=true"});
  }
  const RunResult r = lm("fit", args);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto one = last("one"), two = last("two");
  int compared = 0;
  for (const auto& w : one.tensors) {
    if (w.name.rfind("optimizer.", 0) == 0) continue;
    const auto* g = two.find(w.name);
    ASSERT_NE(g, nullptr) << w.name;
    ++compared;
    for (std::size_t i = 0; i < w.values.size(); ++i)
      ASSERT_NEAR(g->values[i], w.values[i], 2e-5 + 1e-4 * std::abs(w.values[i])) << w.name << "[" << i << "]";
  }
  EXPECT_EQ(compared, 21) << "every weight of the model";
}

INSTANTIATE_TEST_SUITE_P(Strategies, LanguageModelStrategies,
                         ::testing::Values("hpu_parallel", "1", "2", "3", "3_cpu_checkpointing", "2_accumulation",
                                           "3_accumulation"),
                         [](const auto& info) {
                           return info.param == "hpu_parallel" ? info.param : "zero_stage_" + info.param;
                         });

// Mixtral on 2 ranks ends where one device does, though each rank routes its
// tokens to other experts: with 16 experts, one per token and 4 tokens a
// rank, most experts get no token on a rank (no gradient there) and the two
// ranks leave different ones out. Gradient buckets are still reduced in one
// order on every rank (nn::FlatParameters reports them ready in order).
class MixtralStrategies : public LanguageModelTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(MixtralStrategies, RanksWhoseExpertsGetNoTokensTrainToOneDevicesWeights) {
  const std::vector<std::string> mixtral{
      "--model=MixtralForCausalLM", "--model.init_args.hidden_size=32", "--model.init_args.intermediate_size=24",
      "--model.init_args.num_hidden_layers=2", "--model.init_args.num_attention_heads=4",
      "--model.init_args.num_key_value_heads=2", "--model.init_args.max_position_embeddings=64",
      "--model.init_args.num_local_experts=16", "--model.init_args.num_experts_per_tok=1",
      "--data.init_args.block_size=4"};
  std::vector<std::string> one = mixtral, two = mixtral;
  one.insert(one.end(), {"--trainer.default_root_dir=one", "--data.init_args.batch_size=2"});
  two.insert(two.end(), {"--trainer.default_root_dir=two", "--trainer.devices=2", "--data.init_args.batch_size=1"});
  if (GetParam() == "hpu_parallel")
    two.push_back("--trainer.strategy=hpu_parallel");
  else
    two.insert(two.end(), {"--trainer.strategy=HPUDeepSpeedStrategy", "--trainer.strategy.stage=" + GetParam(),
                           "--trainer.strategy.config={zero_allow_untested_optimizer: true}"});
  const RunResult a = lm("fit", one);
  ASSERT_EQ(a.exit_code, 0) << a.describe();
  const RunResult b = lm("fit", two);
  ASSERT_EQ(b.exit_code, 0) << b.describe();
  int compared = 0;
  for (const auto& w : last("one").tensors) {
    if (w.name.rfind("optimizer.", 0) == 0) continue;
    const auto two_ckpt = last("two");
    const auto* g = two_ckpt.find(w.name);
    ASSERT_NE(g, nullptr) << w.name;
    ++compared;
    for (std::size_t i = 0; i < w.values.size(); ++i)
      ASSERT_NEAR(g->values[i], w.values[i], 2e-5 + 1e-4 * std::abs(w.values[i])) << w.name << "[" << i << "]";
  }
  EXPECT_EQ(compared, 2 * (4 + 1 + 16 * 3 + 2) + 3) << "every weight: attention, router, experts, norms";
}

INSTANTIATE_TEST_SUITE_P(Strategies, MixtralStrategies, ::testing::Values("hpu_parallel", "2", "3"),
                         [](const auto& info) {
                           return info.param == "hpu_parallel" ? info.param : "zero_stage_" + info.param;
                         });

}  // namespace
}  // namespace hpu::cli::testing
