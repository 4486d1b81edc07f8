// hpu-train estimate: its shape-only trace allocates as fit does, so its
// peak is fit's MaxInUse (DeviceStatsMonitor) under every strategy.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/fmt/fmt.h>
#include <spdlog/fmt/ranges.h>
#include <sys/resource.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "train_support.h"

namespace hpu::cli::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

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

// kLlama with `more`, after `before` (a subcommand).
std::vector<std::string> llamaWith(std::initializer_list<std::string> more,
                                   std::initializer_list<std::string> before = {}) {
  std::vector<std::string> a = before;
  a.insert(a.end(), kLlama.begin(), kLlama.end());
  a.insert(a.end(), more);
  return a;
}

class EstimateMemory : public TrainRunTest {
 protected:
  // The peak of `estimate fit` with `args`, from its JSON report.
  double estimatedPeak(std::vector<std::string> args) {
    args.insert(args.begin(), {"estimate", "fit", "--json", "peak.json", "--seed_everything=1"});
    const RunResult e = run(args);
    EXPECT_EQ(e.exit_code, 0) << e.describe();
    return nlohmann::json::parse(read("peak.json"))["peak_device_memory_bytes"].get<double>();
  }
};

// Training computes every product's two gradients (input and weight): each
// product's backward costs twice its forward per call, in bf16 and in fp8,
// and attention's backward 2.5 times (its operands' records say that they
// need gradients). Shapes large enough that no fixed cost blurs the ratio.
TEST_F(EstimateMemory, TrainingPricesEveryGradientOfEveryProduct) {
  for (const char* precision : {"bf16-mixed", "fp8"}) {
    const RunResult e = run(llamaWith({"--trainer.precision=" + std::string(precision),
                                       "--model.init_args.hidden_size=1024", "--model.init_args.intermediate_size=2048",
                                       "--model.init_args.num_attention_heads=8",
                                       "--model.init_args.max_position_embeddings=256",
                                       "--data.init_args.block_size=256", "--data.init_args.batch_size=8"},
                                      {"estimate", "fit", "--json", "ops.json"}));
    ASSERT_EQ(e.exit_code, 0) << e.describe();
    const nlohmann::json report = nlohmann::json::parse(read("ops.json"));
    std::map<std::pair<std::string, std::string>, double> per_call;
    for (const auto& op : report["ops"])
      per_call[{op["op"].get<std::string>(), op["operands"].get<std::string>()}] =
          op["seconds"].get<double>() / op["calls"].get<double>();
    int products = 0, attention = 0;
    for (const auto& [key, forward] : per_call) {
      const auto backward = per_call.find({key.first + "_backward", key.second});
      if (backward == per_call.end()) continue;
      const std::string what = std::string(precision) + " " + key.first + " " + key.second;
      if (key.first == "linear" || key.first == "fp8_linear") {
        ++products;
        EXPECT_NEAR(backward->second / forward, 2.0, 1e-3) << what;
      }
      if (key.first == "scaled_dot_product_attention") {
        ++attention;
        EXPECT_NEAR(backward->second / forward, 2.5, 1e-3) << what;
      }
    }
    EXPECT_GE(products, 4) << precision << ": the projections of attention, MLP and lm_head";
    EXPECT_EQ(attention, 1) << precision;
  }
}

// ZeRO-2 and ZeRO-3 reduce-scatter every micro-batch: accumulating four of
// them adds one bucket's gradient shard to the peak (the reduction's
// buffer), not the model's full gradients, which waiting for the last
// micro-batch would hold. Buckets of at most 1000 elements (ZeRO-3: one per
// parameter), so no bucket is near the whole model.
TEST_F(EstimateMemory, ZeroAccumulationHoldsShardsNotFullGradients) {
  for (const char* stage : {"2", "3"}) {
    const std::vector<std::string> zero = {"--trainer.devices=2", "--trainer.strategy=HPUDeepSpeedStrategy",
                                           std::string("--trainer.strategy.stage=") + stage,
                                           "--trainer.strategy.config={zero_optimization: {reduce_bucket_size: 1000}}"};
    auto args = llamaWith({});
    args.insert(args.end(), zero.begin(), zero.end());
    const double one = estimatedPeak(args);
    args.push_back("--trainer.accumulate_grad_batches=4");
    const double four = estimatedPeak(args);
    // 2 layers x (4 x 32 x 32 + 3 x 32 x 64 + 2 x 32) + 2 x 64 x 32 + 32 parameters, fp32.
    const double full_gradients = 4.0 * (2 * (4 * 32 * 32 + 3 * 32 * 64 + 2 * 32) + 2 * 64 * 32 + 32);
    EXPECT_GE(four, one) << "stage " << stage;
    EXPECT_LE(four - one, 4.0 * 64 * 32 / 2) << "stage " << stage << ": at most the largest parameter's shard";
    EXPECT_LT(four - one, full_gradients / 8) << "stage " << stage;
  }
}

// Llama 2 70B on 64 Gaudi2 under ZeRO-3 with activation checkpointing fits:
// the model is built in host memory and partitioned (no rank holds it
// whole), gradients are reduce-scattered every micro-batch. Its parameter
// count is Hugging Face's for the model.
TEST_F(EstimateMemory, Llama2_70BOn64Gaudi2UnderZero3Fits) {
  env()["HPU_EMULATOR_GENERATION"] = "gaudi2";
  const RunResult e =
      run({"estimate", "fit", "-c", HPU_SOURCE_DIR "/configs/estimate/llama2_70b_train_64x_gaudi2.yaml", "--json",
           "70b.json"});
  ASSERT_EQ(e.exit_code, 0) << e.describe();
  const auto j = nlohmann::json::parse(read("70b.json"));
  EXPECT_EQ(j["world_size"], 64);
  EXPECT_EQ(j["total_params"], 68976648192);
  EXPECT_TRUE(j["fits"].get<bool>());
  // bf16 parameter and gradient shards, fp32 master and two Adam shards:
  // 16 bytes x 69e9 / 64.
  const double persistent = j["per_rank"][0]["persistent_bytes"].get<double>();
  EXPECT_NEAR(persistent, 16.0 * 68976648192 / 64, 0.01 * persistent);
  EXPECT_LT(j["peak_device_memory_bytes"].get<double>(), 96.0 * (1ull << 30));
  // Shape-only tensors hold no storage: the largest child this test ran stayed small.
  rusage children{};
  ASSERT_EQ(getrusage(RUSAGE_CHILDREN, &children), 0);
  EXPECT_LT(children.ru_maxrss, 2l << 20) << "KiB of peak resident memory";
}

// Ranks differ only in their shards: with 30-element norm weights over 4
// ranks (ranks 0 and 1 hold 8, ranks 2 and 3 hold 7) there are two classes,
// each traced; rank 0's holds the largest peak, which is the job's.
// The shipped configs name their config.json beside them, so they run
// from any folder: here the test's scratch directory, not the checkout.
TEST_F(EstimateMemory, TheShippedConfigsRunFromAnyFolder) {
  env()["HPU_EMULATOR_GENERATION"] = "gaudi2";
  int configs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(HPU_SOURCE_DIR "/configs/estimate")) {
    if (entry.path().extension() != ".yaml") continue;
    ++configs;
    const std::string name = entry.path().filename().string();
    const RunResult e = run({"estimate", name.find("infer") != std::string::npos ? "predict" : "fit", "-c",
                             entry.path().string()});
    EXPECT_TRUE(e.exit_code == 0 || e.exit_code == 1) << name << ": " << e.describe();  // 1: it does not fit
    EXPECT_THAT(e.out, HasSubstr("  fits ")) << name;
    EXPECT_THAT(e.err, Not(HasSubstr("error"))) << name;
  }
  EXPECT_EQ(configs, 7);
}

TEST_F(EstimateMemory, EveryRankIsAccountedForByItsClass) {
  auto args = llamaWith({"--trainer.devices=4", "--trainer.strategy=hpu_deepspeed_stage_3",
                         "--model.init_args.hidden_size=30", "--model.init_args.num_attention_heads=3"});
  args.insert(args.begin(), {"estimate", "fit", "--json", "ranks.json"});
  const RunResult e = run(args);
  ASSERT_EQ(e.exit_code, 0) << e.describe();
  EXPECT_THAT(e.out, HasSubstr("  ranks 0-1             peak "));
  EXPECT_THAT(e.out, HasSubstr("  ranks 2-3             peak "));
  const auto j = nlohmann::json::parse(read("ranks.json"));
  ASSERT_EQ(j["per_rank"].size(), 2u) << j["per_rank"].dump();
  EXPECT_EQ(j["per_rank"][0]["ranks"], nlohmann::json({0, 1}));
  EXPECT_EQ(j["per_rank"][1]["ranks"], nlohmann::json({2, 3}));
  EXPECT_GT(j["per_rank"][0]["peak_bytes"].get<double>(), j["per_rank"][1]["peak_bytes"].get<double>());
  EXPECT_EQ(j["peak_device_memory_bytes"], j["per_rank"][0]["peak_bytes"]);
}

// The estimate prices the ops fit runs: one training step of a small Llama
// traced by HPUProfiler (the second step: schedule skip 1, active 1) lists
// the same forward ops with the same operand shapes and dtypes, as many
// times, and the same backward ops as many times, as the estimate's step.
TEST_F(EstimateMemory, EstimatesTheOpsFitsProfilerTraces) {
  const std::vector<std::string> common = llamaWith({"--trainer.limit_val_batches=0", "--seed_everything=1"});
  std::vector<std::string> fit = {
      "fit",
      "--trainer.max_steps=2",
      "--trainer.enable_checkpointing=false",
      "--trainer.profiler=HPUProfiler",
      "--trainer.profiler.dirpath=traces",
      "--trainer.profiler.schedule={skip_first: 1, wait: 0, warmup: 0, active: 1, repeat: 1}",
      "--trainer.profiler.record_shapes=true"};
  fit.insert(fit.end(), common.begin(), common.end());
  const RunResult f = run(fit);
  ASSERT_EQ(f.exit_code, 0) << f.describe();
  std::map<std::string, std::int64_t> traced;  // "op operands" (forward) or "op" (backward) -> count
  const auto doc = nlohmann::json::parse(read("traces/rank0-fit.pt.trace.json"));
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X" || e["tid"] != 1) continue;
    std::string key = e["name"];
    if (e.contains("args") && e["args"].contains("Input Dims"))
      for (std::size_t i = 0; i < e["args"]["Input Dims"].size(); ++i) {
        std::vector<std::int64_t> dims = e["args"]["Input Dims"][i];
        key += fmt::format("{}{}[{}]", i == 0 ? " " : " ", e["args"]["Input type"][i].get<std::string>(),
                           fmt::join(dims, ","));
      }
    ++traced[key];
  }
  // A view's backward would be traced under its own name, moving no data on
  // a device, and the estimate lists nothing for it; splitting and merging
  // heads fold their reshape into the permute, so this step has none.
  EXPECT_EQ(traced.erase("reshape_backward"), 0u);
  std::vector<std::string> est = {"estimate", "fit", "--json", "ops.json"};
  est.insert(est.end(), common.begin(), common.end());
  const RunResult e = run(est);
  ASSERT_EQ(e.exit_code, 0) << e.describe();
  std::map<std::string, std::int64_t> estimated;
  const auto report = nlohmann::json::parse(read("ops.json"));
  for (const auto& o : report["ops"]) {
    const std::string op = o["op"];
    // Backward ops carry their forward op's operands in the estimate only.
    const bool backward = op.ends_with("_backward");
    estimated[backward
                  ? op
                  : op + (o["operands"].get<std::string>().empty() ? "" : " " + o["operands"].get<std::string>())] +=
        o["calls"].get<std::int64_t>();
  }
  EXPECT_EQ(estimated, traced);
}

// The JSON report carries what bench/estimate/calibrate.py prices the step
// from: each op's work per call at every efficiency 1 and the calibration;
// priced as GaudiModel::seconds prices it, they give back each op's seconds,
// and with the graphs' host time and the exposed communication, the step.
// With pipeline stages the ops are the slowest stage's, whose step is the
// job's (with 1F1B's bubble).
TEST_F(EstimateMemory, ReportedWorkPricesBackToTheReportedStep) {
  for (const std::string subcommand : {"fit", "predict", "fit pipeline"}) {
    SCOPED_TRACE(subcommand);
    const bool pipeline = subcommand == "fit pipeline";
    auto args = llamaWith({"--trainer.devices=2", "--trainer.strategy=ModelParallelStrategy",
                           "--model.init_args.max_new_tokens=4"},
                          {"estimate", pipeline ? "fit" : subcommand.c_str(), "--json", "work.json"});
    if (pipeline)
      args.insert(args.end(), {"--trainer.strategy.init_args.tensor_parallel_size=1",
                               "--trainer.strategy.init_args.pipeline_parallel_size=2",
                               "--trainer.accumulate_grad_batches=4"});
    const RunResult e = run(args);
    ASSERT_EQ(e.exit_code, 0) << e.describe();
    const auto j = nlohmann::json::parse(read("work.json"));
    const auto& c = j["calibration"];
    double ops = 0;
    for (const auto& o : j["ops"]) {
      const auto& w = o["work"];
      const double mme = w["mme_s"].get<double>() /
                         (w["matrix"] == "attention" ? c["attention"].get<double>() : c["mme"].get<double>());
      const double per_call = std::max({mme, w["tpc_s"].get<double>() / c["tpc"].get<double>(),
                                        w["hbm_s"].get<double>() / c["hbm"].get<double>()}) +
                              w["host_link_s"].get<double>() + w["host_memory_s"].get<double>();
      const double seconds = o["seconds"].get<double>();
      EXPECT_NEAR(o["calls"].get<double>() * per_call, seconds, 1e-9 * seconds) << o["op"] << " " << o["operands"];
      ops += seconds;
    }
    EXPECT_GT(j["graphs"].get<double>(), 0.0);
    const auto& b = j["breakdown"];
    const double step = ops + j["graphs"].get<double>() * c["host_per_graph"].get<double>() +
                        b["exposed_comm_s"].get<double>() + b["pipeline_bubble_s"].get<double>();
    EXPECT_NEAR(step, j["step_time_s"].get<double>(), 1e-9 * step);
    if (pipeline) {
      EXPECT_GT(b["pipeline_bubble_s"].get<double>(), 0.0);
      // The last stage (the head and the loss) is the slower one here.
      EXPECT_TRUE(std::any_of(j["ops"].begin(), j["ops"].end(),
                              [](const auto& o) { return o["op"].template get<std::string>().starts_with("cross_entropy"); }))
          << j["ops"].dump();
      continue;
    }
    EXPECT_GT(j["blocking_collectives"].get<double>(), 0.0) << "tensor-parallel all-reduces wait";
    if (subcommand == "predict") {
      // The likely range: the figure over leave-one-out ratios, each within (0.5, 2).
      ASSERT_TRUE(j.contains("tokens_per_s_range"));
      const double tokens = j["tokens_per_s"], low = j["tokens_per_s_range"][0], high = j["tokens_per_s_range"][1];
      EXPECT_GT(low, tokens / 2);
      EXPECT_LT(low, high);
      EXPECT_LT(high, tokens * 2);
    }
  }
}

// fp8 inference as the quantization toolkit leaves a model: Linear weights in
// fp8, the rest bf16 (2 layers x 10240 projection weights at a byte; 4256
// embedding, head and norm weights at two), and attention reading an fp8 KV
// cache: the prompt's 16 rows in its forward, then prompt + max_new_tokens
// rows, padded once per layer (keys and values: 4 pads) at the first new
// token; with reuse_cache the whole cache from the start and no pad.
TEST_F(EstimateMemory, Fp8InferenceHoldsFp8WeightsAndAnFp8KVCache) {
  for (const bool reuse : {false, true}) {
    SCOPED_TRACE(reuse ? "reuse_cache" : "padded");
    auto args = llamaWith({"--model.init_args.max_new_tokens=8", "--trainer.precision=32-true",
                           "--trainer.plugins=HPUPrecisionPlugin", "--trainer.plugins.precision=fp8",
                           "--trainer.plugins.inference=true",
                           std::string("--model.init_args.reuse_cache=") + (reuse ? "true" : "false")});
    args.insert(args.begin(), {"estimate", "predict", "--json", "fp8.json"});
    const RunResult e = run(args);
    ASSERT_EQ(e.exit_code, 0) << e.describe();
    const auto j = nlohmann::json::parse(read("fp8.json"));
    EXPECT_EQ(j["per_rank"][0]["weights_bytes"], 2 * 10240 + 2 * 4256);
    std::set<std::string> attention;
    std::int64_t pads = 0;
    for (const auto& o : j["ops"]) {
      if (o["op"] == "scaled_dot_product_attention") attention.insert(o["operands"].get<std::string>());
      if (o["op"] == "kv_cache_pad") {
        EXPECT_EQ(o["operands"], "float8_e4m3fn[4,4,16,8] float8_e4m3fn[4,4,24,8]");
        pads += o["calls"].get<std::int64_t>();
      }
    }
    // The prompt's forward reads its own 16 keys either way, decoding the whole cache.
    const std::string prompt_keys = "float8_e4m3fn[4,4,16,8]";
    EXPECT_EQ(attention,
              (std::set<std::string>{"bfloat16[4,4,16,8] " + prompt_keys + " " + prompt_keys,  // the prompt
                                     "bfloat16[4,4,1,8] float8_e4m3fn[4,4,24,8] float8_e4m3fn[4,4,24,8]"}));
    EXPECT_EQ(pads, reuse ? 0 : 4);
  }
}

// attn_implementation: eager is priced as the ops it runs, each layer's
// products and masked softmax over [batch, heads, queries, keys] scores (in
// device memory: Gradcheck.EagerAttention...), where the fused kernel is one
// op; the scores' round trips through HBM make it slower.
TEST_F(EstimateMemory, EagerAttentionIsPricedAsItsProductsAndSoftmaxWithItsScoresInMemory) {
  std::map<std::string, nlohmann::json> report;
  for (const std::string impl : {"sdpa", "eager"}) {
    auto args = llamaWith({"--model.init_args.max_new_tokens=8", "--model.init_args.attn_implementation=" + impl});
    args.insert(args.begin(), {"estimate", "predict", "--json", impl + ".json"});
    const RunResult e = run(args);
    ASSERT_EQ(e.exit_code, 0) << e.describe();
    report[impl] = nlohmann::json::parse(read(impl + ".json"));
  }
  const auto ops = [&](const std::string& impl) {
    std::set<std::string> names;
    for (const auto& o : report[impl]["ops"]) names.insert(o["op"].get<std::string>());
    return names;
  };
  EXPECT_TRUE(ops("sdpa").contains("scaled_dot_product_attention"));
  EXPECT_FALSE(ops("sdpa").contains("attention_softmax"));
  EXPECT_FALSE(ops("eager").contains("scaled_dot_product_attention"));
  EXPECT_TRUE(ops("eager").contains("attention_softmax"));
  EXPECT_TRUE(ops("eager").contains("matmul"));
  EXPECT_GT(report["eager"]["step_time_s"].get<double>(), report["sdpa"]["step_time_s"].get<double>());
}

// fit on a model too large for this host's memory stops before the kernel
// would kill it, and points to estimate (a 784 x 2e7 layer: 63 GB of fp32,
// under Gaudi2's 96 GiB but beyond any CI machine).
TEST_F(EstimateMemory, FitBeyondTheHostsMemoryPointsToEstimate) {
  env()["HPU_EMULATOR_GENERATION"] = "gaudi2";
  const RunResult r = run({"fit", "-c", HPU_SOURCE_DIR "/configs/fashion_mnist_mlp.yaml", "--model.hidden=[20000000]",
                           "--trainer.max_steps=1", "--trainer.enable_model_summary=false"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(r.err,
            "error: hpu:0: the host has no 64 GiB left to emulate device memory (0 B in use on the device). To see "
            "whether the run fits a Gaudi, and how fast it trains, without allocating: hpu-train estimate with the "
            "same arguments. To run here: lower data.init_args.batch_size or the model's size\n");
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, EstimateMatchesFit,
    ::testing::Values(
        EstimateCase{
            "MlpSingle",
            {"-c", HPU_SOURCE_DIR "/configs/fashion_mnist_mlp.yaml", "--trainer.devices=1", "--trainer.logger=true"}},
        EstimateCase{"LlamaSingle", kLlama},
        // The model's vocabulary is the data's tokenizer's (bytes), as fit's.
        EstimateCase{"LlamaOnTextBytes",
                     {"--model=LlamaForCausalLM", "--model.init_args.hidden_size=32",
                      "--model.init_args.intermediate_size=64", "--model.init_args.num_hidden_layers=2",
                      "--model.init_args.num_attention_heads=4", "--model.init_args.max_position_embeddings=32",
                      "--data=TextDataModule", "--data.init_args.path=/usr/share/common-licenses/GPL-3",
                      "--data.init_args.block_size=16", "--data.init_args.batch_size=4"}},
        EstimateCase{"LlamaParallel",
                     [] {
                       auto a = kLlama;
                       a.insert(a.end(), {"--trainer.devices=2", "--trainer.strategy=hpu_parallel"});
                       return a;
                     }()},
        EstimateCase{
            "CnnSingle",
            {"-c", HPU_SOURCE_DIR "/configs/fashion_mnist_cnn.yaml", "--trainer.devices=1", "--trainer.logger=true"}},
        EstimateCase{"LlamaZeRO1", llamaWith({"--trainer.devices=2", "--trainer.strategy=hpu_deepspeed_stage_1"})},
        EstimateCase{"LlamaTensorParallel2",
                     llamaWith({"--trainer.devices=2", "--trainer.strategy=ModelParallelStrategy"})},
        EstimateCase{"LlamaSequenceParallel2",
                     llamaWith({"--trainer.devices=2", "--trainer.strategy=ModelParallelStrategy",
                                "--trainer.strategy.init_args.sequence_parallel=true"})},
        EstimateCase{"LlamaTensorParallel2DataParallel2",
                     llamaWith({"--trainer.devices=4", "--trainer.strategy=ModelParallelStrategy",
                                "--trainer.strategy.init_args.tensor_parallel_size=2",
                                "--trainer.strategy.init_args.data_parallel_size=2"})},
        EstimateCase{"LlamaPipelineParallel2",
                     llamaWith({"--trainer.devices=2", "--trainer.strategy=ModelParallelStrategy",
                                "--trainer.strategy.init_args.tensor_parallel_size=1",
                                "--trainer.strategy.init_args.pipeline_parallel_size=2",
                                "--trainer.accumulate_grad_batches=4"})},
        EstimateCase{"LlamaTensorParallel2PipelineParallel2",
                     llamaWith({"--trainer.devices=4", "--trainer.strategy=ModelParallelStrategy",
                                "--trainer.strategy.init_args.tensor_parallel_size=2",
                                "--trainer.strategy.init_args.pipeline_parallel_size=2",
                                "--trainer.accumulate_grad_batches=4"})},
        EstimateCase{"LlamaPipelineParallel2DataParallel2ZeRO1",
                     llamaWith({"--trainer.devices=4", "--trainer.strategy=ModelParallelStrategy",
                                "--trainer.strategy.init_args.tensor_parallel_size=1",
                                "--trainer.strategy.init_args.pipeline_parallel_size=2",
                                "--trainer.strategy.init_args.zero_stage=1", "--trainer.accumulate_grad_batches=2"})},
        EstimateCase{"LlamaDataParallel2ZeRO1Bf16Model",
                     llamaWith({"--trainer.devices=2", "--trainer.strategy=ModelParallelStrategy",
                                "--trainer.strategy.init_args.tensor_parallel_size=1",
                                "--trainer.strategy.init_args.data_parallel_size=2",
                                "--trainer.strategy.init_args.zero_stage=1", "--trainer.precision=bf16-mixed",
                                "--model.init_args.gradient_checkpointing=selective"})},
        EstimateCase{"LlamaZeRO2Accumulation",
                     llamaWith({"--trainer.devices=2", "--trainer.strategy=hpu_deepspeed_stage_2",
                                "--trainer.accumulate_grad_batches=2"})},
        EstimateCase{"LlamaZeRO2Offload",
                     llamaWith({"--trainer.devices=2", "--trainer.strategy=hpu_deepspeed_stage_2_offload"})},
        EstimateCase{"LlamaZeRO3", llamaWith({"--trainer.devices=2", "--trainer.strategy=hpu_deepspeed_stage_3"})},
        EstimateCase{
            "LlamaZeRO3CheckpointingAccumulation",
            llamaWith({"--trainer.devices=2", "--trainer.strategy=hpu_deepspeed_stage_3",
                       "--model.init_args.gradient_checkpointing=true", "--trainer.accumulate_grad_batches=2"})}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace hpu::cli::testing
