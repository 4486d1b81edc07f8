// Fine-tuning a pretrained model through the real binary: a small Llama
// trained on text, exported as a Hugging Face directory, then fine-tuned
// from it with LoRA (and whole) on one device, on 2 ranks of hpu_parallel
// and of ZeRO-3, which must reach one device's weights for the same global
// batch (|a - b| <= 1e-6 + 1e-5 |a|: ranks sum gradients in another order);
// ZeRO-3 ranks each read their shard of the files, not the whole; the
// merged export and the LoRA checkpoint generate the same tokens, the
// export without a data section.
#include <gmock/gmock.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "train_support.h"

namespace hpu::cli::testing {
namespace {

using core::checkpoint::Checkpoint;

// A few kilobytes of varied text, the same on every platform.
std::string corpus() {
  std::ostringstream out;
  const char* words[] = {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and", "sleeps", "now"};
  for (int i = 0; i < 700; ++i) out << words[(i * 7 + i / 3) % 11] << (i % 13 == 12 ? ".\n" : " ");
  return out.str();
}

constexpr const char* kConfig = R"(seed_everything: 3
trainer:
  devices: 1
  max_steps: 3
  enable_progress_bar: false
  enable_model_summary: false
  num_sanity_val_steps: 0
  limit_val_batches: 0
  callbacks:
    - {class_path: ModelCheckpoint, init_args: {filename: final}}
model:
  class_path: LlamaForCausalLM
  init_args: {hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4,
              num_key_value_heads: 2, max_position_embeddings: 64, lr: 0.01, weight_decay: 0.0,
              max_new_tokens: 12, prompt: "the quick"}
data:
  class_path: TextDataModule
  init_args: {path: corpus.txt, block_size: 32, batch_size: 4, val_split: 0.1}
)";

bool close(float expected, float actual) { return std::fabs(expected - actual) <= 1e-6f + 1e-5f * std::fabs(expected); }

// The tensors of `want` whose name contains `part` are in `got`, within close().
void expectClose(const Checkpoint& want, const Checkpoint& got, const std::string& part, const std::string& what) {
  int n = 0;
  for (const auto& e : want.tensors) {
    if (e.name.find(part) == std::string::npos || e.name.starts_with("optimizer.")) continue;
    ++n;
    const auto* a = got.find(e.name);
    ASSERT_NE(a, nullptr) << what << ": no " << e.name;
    ASSERT_EQ(a->values.size(), e.values.size()) << what << ": " << e.name;
    for (std::size_t i = 0; i < e.values.size(); ++i)
      if (!close(e.values[i], a->values[i])) {
        ADD_FAILURE() << what << ": " << e.name << "[" << i << "] is " << a->values[i] << ", one device's "
                      << e.values[i];
        break;
      }
  }
  EXPECT_GT(n, 0) << what << ": no tensor named *" << part << "*";
}

class FineTuningTest : public HpuTrainTest {
 protected:
  void SetUp() override {
    write("corpus.txt", corpus());
    write("llama.yaml", kConfig);
    const RunResult base = run({"fit", "-c", "llama.yaml", "--trainer.default_root_dir=base"});
    ASSERT_EQ(base.exit_code, 0) << base.describe();
    const RunResult exported = run({"export", "--ckpt_path", checkpointOf("base"), "--output", "hf"});
    ASSERT_EQ(exported.exit_code, 0) << exported.describe();
  }
  static std::string checkpointOf(const std::string& root) {
    return root + "/lightning_logs/version_0/checkpoints/final.ckpt";
  }
  // fit from the export (its weights and tokenizer) in `root` with `args`.
  RunResult fineTune(const std::string& root, std::vector<std::string> args) {
    std::vector<std::string> full{"fit", "-c", "llama.yaml", "--model.pretrained=hf", "--trainer.default_root_dir=" + root};
    full.insert(full.end(), args.begin(), args.end());
    RunResult r = run(full);
    EXPECT_EQ(r.exit_code, 0) << root << ": " << r.describe();
    return r;
  }
  Checkpoint checkpoint(const std::string& root) const { return readCheckpoint(dir() / checkpointOf(root)); }
  // predictions.jsonl's token ids of the newest predict run in `root`.
  std::vector<std::int64_t> predicted(const std::string& root) const {
    std::istringstream lines(read(root + "/lightning_logs/version_0/predictions.jsonl"));
    std::string line;
    std::getline(lines, line);
    return nlohmann::json::parse(line)["token_ids"].get<std::vector<std::int64_t>>();
  }
};

TEST_F(FineTuningTest, LoraTrainsAlikeOnOneDeviceHpuParallelAndZero3) {
  const std::string lora = "--model.lora={r: 4, lora_alpha: 8, target_modules: [q_proj, v_proj, down_proj]}";
  fineTune("one", {lora});
  fineTune("ddp", {lora, "--trainer.devices=2", "--data.batch_size=2"});
  fineTune("zero3", {lora, "--trainer.devices=2", "--trainer.strategy=deepspeed_stage_3", "--data.batch_size=2"});
  const Checkpoint one = checkpoint("one");
  for (const char* root : {"ddp", "zero3"}) {
    expectClose(one, checkpoint(root), "lora_", root);
    expectClose(one, checkpoint(root), "q_proj.weight", root);
  }
  // The base weights stayed the export's.
  const Checkpoint base = checkpoint("base");
  for (const auto& e : base.tensors)
    if (e.name.starts_with("model.") || e.name.starts_with("lm_head")) {
      EXPECT_EQ(one.find(e.name)->values, e.values) << e.name;
    }
  // fp8 replaces the frozen Linear layers and keeps them frozen.
  const RunResult fp8 = fineTune("fp8", {lora, "--trainer.precision=fp8", "--trainer.enable_model_summary=true"});
  EXPECT_THAT(fp8.out, ::testing::HasSubstr("1.5 K     Trainable params")) << fp8.out;
  // Only the adapters have optimizer state: 2 layers x (q, v, down) x (A, B).
  std::int64_t state = 0;
  for (const auto& t : one.tensors)
    if (t.name.starts_with("optimizer.exp_avg.")) state += static_cast<std::int64_t>(t.values.size());
  EXPECT_EQ(state, 2 * ((4 * 32 + 32 * 4) + (4 * 32 + 16 * 4) + (4 * 48 + 32 * 4)));
}

// A LoRA run resumes from its checkpoint (whose frozen base weights the
// optimizer never held) to the uninterrupted run's adapters.
TEST_F(FineTuningTest, LoraRunResumesToTheUninterruptedRunsAdapters) {
  const std::string lora = "--model.lora={r: 4, lora_alpha: 8, target_modules: [q_proj, v_proj, down_proj]}";
  const std::string every_step =
      "--trainer.callbacks=[{class_path: ModelCheckpoint, init_args: {every_n_train_steps: 1, save_top_k: -1}}]";
  fineTune("whole", {lora, every_step});
  fineTune("first", {lora, every_step, "--trainer.max_steps=2"});
  fineTune("resumed", {lora, every_step, "--ckpt_path=first/lightning_logs/version_0/checkpoints/epoch=0-step=2.ckpt"});
  const auto step3 = [&](const std::string& root) {
    return readCheckpoint(dir() / root / "lightning_logs/version_0/checkpoints/epoch=0-step=3.ckpt");
  };
  expectClose(step3("whole"), step3("resumed"), "lora_", "resumed");
}

TEST_F(FineTuningTest, Zero3RanksReadTheirShardOfThePretrainedFiles) {
  fineTune("one", {});
  env()["HPU_LOG_LEVEL"] = "info";  // the ranks' reading lines
  const RunResult zero3 = fineTune("zero3", {"--trainer.devices=2", "--trainer.strategy=deepspeed_stage_3",
                                             "--data.batch_size=2"});
  expectClose(checkpoint("one"), checkpoint("zero3"), "", "zero3");
  // "[rank R] info: pretrained: this rank read X of the Y bytes (Z%) of weights in hf"
  static const std::regex kRead(R"(\[rank (\d)\] info: pretrained: this rank read (\d+) of the (\d+) bytes)");
  int ranks = 0;
  for (std::sregex_iterator it(zero3.err.begin(), zero3.err.end(), kRead), end; it != end; ++it, ++ranks) {
    const double read = std::stod((*it)[2]), stored = std::stod((*it)[3]);
    EXPECT_GT(read, 0.3 * stored) << it->str();
    EXPECT_LT(read, 0.7 * stored) << it->str();
  }
  EXPECT_EQ(ranks, 2) << zero3.err;
  // A padded vocabulary (256 bytes in 288 rows): each rank fills its part of
  // the padded embedding and head from the files' unpadded tensors, zero past them.
  fineTune("zero3_padded", {"--trainer.devices=2", "--trainer.strategy=deepspeed_stage_3", "--data.batch_size=2",
                            "--model.make_vocab_size_divisible_by=96"});
  expectClose(checkpoint("one"), checkpoint("zero3_padded"), "", "zero3_padded");
}

// Two pipeline stages from the export: each stage loads its part of the
// files (the other stage's tensors are there too), and the run reaches one
// device's losses and weights.
TEST_F(FineTuningTest, PipelineStagesStartFromThePretrainedFilesAsOneDevice) {
  const auto losses = [&](const std::string& root) {
    std::vector<double> out;
    for (const std::string& cell : readCsv(dir() / root / "lightning_logs/version_0/metrics.csv").column("train_loss"))
      if (!cell.empty()) out.push_back(std::stod(cell));
    return out;
  };
  fineTune("one", {"--trainer.log_every_n_steps=1"});
  fineTune("pp2", {"--trainer.log_every_n_steps=1", "--trainer.devices=2", "--trainer.strategy=ModelParallelStrategy",
                   "--trainer.strategy.init_args.tensor_parallel_size=1",
                   "--trainer.strategy.init_args.pipeline_parallel_size=2",
                   "--trainer.strategy.init_args.save_distributed_checkpoint=false"});
  const std::vector<double> one = losses("one"), pp2 = losses("pp2");
  ASSERT_EQ(one.size(), 3u);
  ASSERT_EQ(pp2.size(), one.size());
  for (std::size_t i = 0; i < one.size(); ++i)
    EXPECT_TRUE(close(static_cast<float>(one[i]), static_cast<float>(pp2[i]))) << "step " << i << ": " << pp2[i]
                                                                                << " vs one device's " << one[i];
  expectClose(checkpoint("one"), checkpoint("pp2"), "", "pp2");
}

// Generation under ZeRO-3, whose parameters hold no storage outside their
// module's forward, gives one device's tokens.
TEST_F(FineTuningTest, Zero3GeneratesOneDevicesTokens) {
  for (const auto& [root, layout] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"one", {}}, {"zero3", {"--trainer.devices=2", "--trainer.strategy=deepspeed_stage_3"}}}) {
    std::vector<std::string> args{"predict", "-c", "llama.yaml", "--model.pretrained=hf",
                                  "--trainer.default_root_dir=" + root};
    args.insert(args.end(), layout.begin(), layout.end());
    const RunResult r = run(args);
    ASSERT_EQ(r.exit_code, 0) << root << ": " << r.describe();
  }
  EXPECT_EQ(predicted("zero3").size(), 12u);
  EXPECT_EQ(predicted("zero3"), predicted("one"));
}

// export and consolidate take last and best as fit and predict do, and
// say which file they picked; a checkpoint whose config names a directory
// that is gone says so, not that the directory lacks a config.json.
TEST_F(FineTuningTest, ExportAndConsolidateTakeLastAndBest) {
  env()["HPU_LOG_LEVEL"] = "info";
  const RunResult fit = run({"fit", "-c", "llama.yaml", "--trainer.callbacks.save_last=true"});
  ASSERT_EQ(fit.exit_code, 0) << fit.describe();
  const RunResult last = run({"export", "--ckpt_path", "last", "--output", "from_last"});
  ASSERT_EQ(last.exit_code, 0) << last.describe();
  EXPECT_THAT(last.err, ::testing::HasSubstr("info: --ckpt_path last: lightning_logs/version_0/checkpoints/last.ckpt "
                                             "(the newest run's last.ckpt)\n"));
  EXPECT_EQ(read("from_last/model.safetensors"), read("hf/model.safetensors"));  // the same 3 steps as base's
  const RunResult best = run({"export", "--ckpt_path", "best", "--output", "from_best"});
  ASSERT_EQ(best.exit_code, 0) << best.describe();
  EXPECT_THAT(best.err, ::testing::HasSubstr(
                            "info: --ckpt_path best: ./lightning_logs/version_0/checkpoints/final.ckpt (the best "
                            "checkpoint ModelCheckpoint recorded in lightning_logs/version_0/checkpoints/last.ckpt)\n"));
  // Two ZeRO ranks write their optimizer shards beside the newest last.ckpt.
  const RunResult zero = run({"fit", "-c", "llama.yaml", "--trainer.callbacks.save_last=true", "--trainer.devices=2",
                              "--trainer.strategy=deepspeed_stage_2", "--data.batch_size=2"});
  ASSERT_EQ(zero.exit_code, 0) << zero.describe();
  const RunResult whole = run({"consolidate", "last", "whole.ckpt"});
  ASSERT_EQ(whole.exit_code, 0) << whole.describe();
  EXPECT_THAT(whole.err, ::testing::HasSubstr("info: consolidate INPUT last: lightning_logs/version_1/checkpoints/"
                                              "last.ckpt (the newest run's last.ckpt)\n"));
  EXPECT_GT(readCheckpoint(dir() / "whole.ckpt").metadata.count("optimizer"), 0u);
  // A fine-tune names the export it started from; once that is gone, export says so.
  fineTune("lora", {"--model.lora={r: 4, lora_alpha: 8}"});
  std::filesystem::rename(dir() / "hf", dir() / "hf_moved");
  const RunResult gone = run({"export", "--ckpt_path", checkpointOf("lora"), "--output", "merged"});
  EXPECT_EQ(gone.exit_code, 2) << gone.describe();
  EXPECT_THAT(gone.err, ::testing::MatchesRegex(
                            "error: the config saved in lora/lightning_logs/version_0/checkpoints/final\\.ckpt:[0-9]+:[0-9]+: "
                            "model\\.init_args\\.pretrained: no such directory: " + (dir() / "hf").string() +
                            " \\(a relative path given here is read from the working directory\\)\n"));
}

TEST_F(FineTuningTest, TheMergedExportGeneratesAsTheLoraCheckpointWithoutAData) {
  fineTune("lora", {"--model.lora={r: 4, lora_alpha: 8}", "--trainer.max_steps=6"});
  ASSERT_EQ(run({"export", "--ckpt_path", checkpointOf("lora"), "--output", "merged"}).exit_code, 0);
  const RunResult adapter = run({"export", "--ckpt_path", checkpointOf("lora"), "--output", "adapter", "--adapter"});
  ASSERT_EQ(adapter.exit_code, 0) << adapter.describe();
  EXPECT_EQ(fileNames(dir() / "adapter"),
            (std::vector<std::string>{"adapter_config.json", "adapter_model.safetensors"}));
  EXPECT_EQ(fileNames(dir() / "merged"),
            (std::vector<std::string>{"config.json", "generation_config.json", "model.safetensors",
                                      "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"}));
  const RunResult from_ckpt = run({"predict", "-c", "llama.yaml", "--model.pretrained=hf",
                                   "--model.lora={r: 4, lora_alpha: 8}", "--ckpt_path", checkpointOf("lora"),
                                   "--trainer.default_root_dir=p1"});
  ASSERT_EQ(from_ckpt.exit_code, 0) << from_ckpt.describe();
  write("merged.yaml",
        "trainer: {devices: 1, enable_progress_bar: false, default_root_dir: p2}\n"
        "model: {class_path: LlamaForCausalLM, init_args: {pretrained: merged, prompt: \"the quick\", "
        "max_new_tokens: 12}}\n");
  const RunResult from_export = run({"predict", "-c", "merged.yaml"});
  ASSERT_EQ(from_export.exit_code, 0) << from_export.describe();
  const std::vector<std::int64_t> tokens = predicted("p1");
  EXPECT_EQ(tokens.size(), 12u);
  EXPECT_EQ(predicted("p2"), tokens);
  // A conversation goes through the tokenizer's chat template.
  nlohmann::json config = nlohmann::json::parse(read("merged/tokenizer_config.json"));
  config["chat_template"] =
      "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}<assistant>"
      "{% endif %}";
  write("merged/tokenizer_config.json", config.dump());
  write("chat.yaml",
        "trainer: {devices: 1, enable_progress_bar: false, default_root_dir: p4}\n"
        "model: {class_path: LlamaForCausalLM, init_args: {pretrained: merged, max_new_tokens: 5, "
        "messages: [{role: user, content: the lazy dog}]}}\n");
  const RunResult chat = run({"predict", "-c", "chat.yaml"});
  ASSERT_EQ(chat.exit_code, 0) << chat.describe();
  EXPECT_EQ(nlohmann::json::parse(read("p4/lightning_logs/version_0/predictions.jsonl"))["prompt"],
            "<user>the lazy dog<assistant>");
  // The adapter directory starts a LoRA fine-tune where the checkpoint left it.
  const RunResult resumed = run({"predict", "-c", "llama.yaml", "--model.pretrained=hf", "--model.lora_path=adapter",
                                 "--trainer.default_root_dir=p3"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_EQ(predicted("p3"), tokens);
}

}  // namespace
}  // namespace hpu::cli::testing
