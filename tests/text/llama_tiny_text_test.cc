// configs/llama_tiny_text.yaml as docs/language-models.md runs it: fit on
// the fortunes corpus reaches the validation bits per byte that page
// states, and predict continues the config's prompts from the checkpoint.
#include <gmock/gmock.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "train_support.h"

namespace hpu::cli::testing {
namespace {

// docs/language-models.md: "reaches a validation loss of at most 2.5 bits per byte".
constexpr double kStatedValBpb = 2.5;
constexpr const char* kCorpus = "/usr/share/games/fortunes";

class LlamaTinyTextTest : public HpuTrainTest {
 protected:
  RunResult hpuTrain(std::vector<std::string> args) {
    args.insert(args.begin() + 1, {"--config", std::string(HPU_SOURCE_DIR) + "/configs/llama_tiny_text.yaml"});
    return runProgram(trainBinary(), args, {dir(), env(), std::chrono::minutes(40)});
  }
};

TEST_F(LlamaTinyTextTest, ReachesTheStatedBitsPerByteAndGeneratesFromItsCheckpoint) {
  ASSERT_TRUE(std::filesystem::is_directory(kCorpus))
      << kCorpus << " is missing: scripts/install-deps.sh installs Debian's fortunes";
  const RunResult fit = hpuTrain({"fit", "--trainer.enable_progress_bar=false"});
  ASSERT_EQ(fit.exit_code, 0) << fit.describe();
  const CsvTable m = readCsv(dir() / "lightning_logs/version_0/metrics.csv");
  const std::vector<std::string> checks = m.loggedAt("val_bpb");
  ASSERT_EQ(checks.size(), 4u) << "validation every 250 of the 1000 steps";
  double previous = 8.0;
  for (const std::string& at : checks) {
    const double bpb = m.valueAt("val_bpb", std::stoll(at.substr(at.find(',') + 1)));
    EXPECT_LT(bpb, previous) << "validation improves at step " << at;
    previous = bpb;
  }
  EXPECT_LE(previous, kStatedValBpb);
  std::cout << "final val_bpb " << previous << " after " << fit.wall.count() << " s\n";

  const RunResult predict =
      hpuTrain({"predict", "--ckpt_path=lightning_logs/version_0/checkpoints/last.ckpt", "--trainer.logger=false"});
  ASSERT_EQ(predict.exit_code, 0) << predict.describe();
  std::istringstream lines(read("predictions.jsonl"));
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    const auto p = nlohmann::json::parse(line);
    EXPECT_EQ(p["token_ids"].size(), 120u);
    EXPECT_THAT(predict.out, ::testing::HasSubstr(p["prompt"].get<std::string>()));
  }
  EXPECT_EQ(n, 2) << "the config's two prompts";

  // docs/language-models.md's "Fine-tuning a pretrained model", shortened: export, LoRA on
  // the riddles from the export, the merged export generating without data.
  const auto ok = [](const RunResult& r) { EXPECT_EQ(r.exit_code, 0) << r.describe(); };
  ok(runProgram(trainBinary(),
                {"export", "--ckpt_path", "lightning_logs/version_0/checkpoints/last.ckpt", "--output", "fortunes-llama"},
                {dir(), env(), std::chrono::minutes(5)}));
  ok(runScript("riddles-to-jsonl.sh", {"riddles.jsonl"}));
  const RunResult lora = runProgram(
      trainBinary(),
      {"fit", "--config", std::string(HPU_SOURCE_DIR) + "/configs/llama_tiny_lora.yaml", "--trainer.max_steps=30",
       "--trainer.enable_progress_bar=false", "--trainer.default_root_dir=lora"},
      {dir(), env(), std::chrono::minutes(10)});
  ok(lora);
  EXPECT_THAT(read("lora/lightning_logs/version_0/metrics.csv"), ::testing::HasSubstr("val_loss"));
  ok(runProgram(trainBinary(),
                {"export", "--ckpt_path", "lora/lightning_logs/version_0/checkpoints/last.ckpt", "--output", "merged"},
                {dir(), env(), std::chrono::minutes(5)}));
  const RunResult answer = runProgram(
      trainBinary(),
      {"predict", "--trainer.devices=1", "--trainer.default_root_dir=answer", "--model", "LlamaForCausalLM",
       "--model.pretrained", "merged", "--model.prompt", "Q: Why?\nA:", "--model.max_new_tokens", "16"},
      {dir(), env(), std::chrono::minutes(5)});
  ok(answer);
  EXPECT_EQ(nlohmann::json::parse(read("answer/lightning_logs/version_0/predictions.jsonl"))["token_ids"].size(), 16u);
}

}  // namespace
}  // namespace hpu::cli::testing
