// hpu-train estimate: its shape-only trace allocates as fit does, so its
// peak is fit's MaxInUse (DeviceStatsMonitor) under every strategy.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "train_support.h"

namespace hpu::cli::testing {
namespace {

using ::testing::HasSubstr;

struct EstimateCase {
  std::string name;
  std::vector<std::string> args;
};

class EstimateMatchesFit : public TrainRunTest, public ::testing::WithParamInterface<EstimateCase> {};

const std::vector<std::string> kLlama = {"--model=LlamaForCausalLM",
                                         "--model.init_args.hidden_size=32",
                                         "--model.init_args.intermediate_size=64",
                                         "--model.init_args.num_hidden_layers=2",
                                         "--model.init_args.num_attention_heads=4",
                                         "--model.init_args.max_position_embeddings=32",
                                         "--model.init_args.vocab_size=64",
                                         "--data=RandomTokensDataModule",
                                         "--data.init_args.vocab_size=64",
                                         "--data.init_args.block_size=16",
                                         "--data.init_args.batch_size=4",
                                         "--data.init_args.num_samples=64",
                                         "--trainer.precision=bf16-mixed"};

TEST_P(EstimateMatchesFit, PeakDeviceMemoryIsFitsMaxInUse) {
  std::vector<std::string> common = GetParam().args;
  common.insert(common.end(), {"--trainer.max_steps=2", "--trainer.limit_val_batches=0", "--seed_everything=1"});
  std::vector<std::string> fit = {"fit", "--trainer.callbacks=[DeviceStatsMonitor]", "--trainer.log_every_n_steps=1",
                                  "--trainer.enable_checkpointing=false", "--trainer.enable_progress_bar=false"};
  fit.insert(fit.end(), common.begin(), common.end());
  const RunResult f = run(fit);
  ASSERT_EQ(f.exit_code, 0) << f.describe();
  const double max_in_use = readCsv(dir() / "lightning_logs/version_0/metrics.csv")
                                .valueAt("DeviceStatsMonitor.on_train_batch_end/MaxInUse", 1);
  std::vector<std::string> est = {"estimate", "fit", "--json", "estimate.json"};
  est.insert(est.end(), common.begin(), common.end());
  const RunResult e = run(est);
  ASSERT_EQ(e.exit_code, 0) << e.describe();
  EXPECT_THAT(e.out, HasSubstr("fits                  yes"));
  const auto j = nlohmann::json::parse(read("estimate.json"));
  for (const char* key : {"step_time_s", "mfu", "total_params", "peak_device_memory_bytes", "device_memory_limit_bytes",
                          "fits", "breakdown", "per_rank", "assumptions"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["peak_device_memory_bytes"].get<double>(), max_in_use);
  EXPECT_GT(j["step_time_s"].get<double>(), 0.0);
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, EstimateMatchesFit,
    ::testing::Values(EstimateCase{"MlpSingle",
                                   {"-c", HPU_SOURCE_DIR "/configs/fashion_mnist_mlp.yaml", "--trainer.devices=1",
                                    "--trainer.logger=true"}},
                      EstimateCase{"LlamaSingle", kLlama},
                      EstimateCase{"LlamaParallel",
                                   [] {
                                     auto a = kLlama;
                                     a.insert(a.end(), {"--trainer.devices=2", "--trainer.strategy=hpu_parallel"});
                                     return a;
                                   }()},
                      EstimateCase{
                          "LlamaZeRO3",
                          [] {
                            auto a = kLlama;
                            a.insert(a.end(), {"--trainer.devices=2", "--trainer.strategy=hpu_deepspeed_stage_3"});
                            return a;
                          }()}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace hpu::cli::testing
