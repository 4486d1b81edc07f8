// fp8 inference through the binary, the two-step flow of the reference:
// predict with HPUPrecisionPlugin(fp8, inference, quant: false) measures
// each Linear layer's input and weight max |x| into a JSON file; quant: true
// reads them and runs those layers in fp8 (E4M3). QUANT_CONFIG selects the
// mode and the statistics path instead.
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

#include "train_support.h"

namespace hpu::cli::testing {
namespace {

using nlohmann::json;

class Fp8InferenceTest : public FashionRunTest {
 protected:
  // The trained checkpoint of fashionConfig() (one epoch).
  std::string trained() {
    const RunResult fit = run({"fit", "-c", fashionConfig(), "--trainer.max_epochs=1", "--trainer.enable_progress_bar=false",
                               "--trainer.enable_model_summary=false"});
    EXPECT_EQ(fit.exit_code, 0) << fit.describe();
    const auto names = fileNames(dir() / "lightning_logs/version_0/checkpoints");
    EXPECT_FALSE(names.empty());
    return names.empty() ? "" : "lightning_logs/version_0/checkpoints/" + names.front();
  }
  RunResult predict(const std::string& ckpt, std::vector<std::string> plugin) {
    std::vector<std::string> args = {"predict", "-c", fashionConfig(), "--ckpt_path", ckpt, "--trainer.enable_progress_bar=false",
                                     "--trainer.limit_predict_batches=2"};
    args.insert(args.end(), plugin.begin(), plugin.end());
    return run(args);
  }
  static std::vector<std::string> fp8(bool quant) {
    return {"--trainer.plugins+=lightning_habana.pytorch.plugins.precision.HPUPrecisionPlugin",
            "--trainer.plugins.precision=fp8", "--trainer.plugins.inference=true",
            std::string("--trainer.plugins.quant=") + (quant ? "true" : "false")};
  }
  // The newest lightning_logs/version_N.
  int latestVersion() const {
    int newest = -1;
    for (const auto& e : std::filesystem::directory_iterator(dir() / "lightning_logs"))
      if (const std::string n = e.path().filename().string(); n.starts_with("version_"))
        newest = std::max(newest, std::stoi(n.substr(8)));
    return newest;
  }
  // The output columns of version_N's predictions.csv, row by row.
  std::vector<std::vector<double>> outputs(int version) {
    const CsvTable t = readCsv(dir() / "lightning_logs" / ("version_" + std::to_string(version)) / "predictions.csv");
    std::vector<std::vector<double>> rows;
    for (const auto& r : t.rows) {
      std::vector<double> out;
      for (std::size_t c = 2; c < r.size(); ++c) out.push_back(std::stod(r[c]));
      rows.push_back(out);
    }
    return rows;
  }
};

TEST_F(Fp8InferenceTest, MeasureThenQuantizeRunsTheLinearLayersInFp8) {
  const std::string ckpt = trained();
  ASSERT_EQ(predict(ckpt, {}).exit_code, 0);  // version_1: the fp32 reference

  // Quantizing before measuring names the missing file and the step to run.
  const RunResult early = predict(ckpt, fp8(true));
  EXPECT_EQ(early.exit_code, 2) << early.describe();
  EXPECT_EQ(early.err,
            "error: fp8 quantization needs the measurements in ./hqt_output/measure.json; run predict with "
            "HPUPrecisionPlugin(inference: true, quant: false) first\n");

  const RunResult measure = predict(ckpt, fp8(false));
  ASSERT_EQ(measure.exit_code, 0) << measure.describe();
  std::ifstream in(dir() / "hqt_output/measure.json");
  const json stats = json::parse(in);
  EXPECT_EQ(stats["Mode"], "MEASURE");
  ASSERT_EQ(stats["Nodes"].size(), 2u) << stats.dump();  // the MLP's two Linear layers
  for (const auto& [layer, node] : stats["Nodes"].items()) {
    EXPECT_GT(node["inputs"][0].get<double>(), 0.0) << layer;
    EXPECT_GT(node["params"]["weight"].get<double>(), 0.0) << layer;
  }

  const RunResult quantized = predict(ckpt, fp8(true));
  ASSERT_EQ(quantized.exit_code, 0) << quantized.describe();
  const auto ref = outputs(1);
  const auto q = outputs(latestVersion());
  ASSERT_EQ(q.size(), ref.size());
  ASSERT_EQ(ref.size(), 128u);  // 2 batches of 64
  // fp8 (3 mantissa bits) moves every logit a little and few arg-maxes.
  double max_diff = 0;
  int agree = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    ASSERT_EQ(q[i].size(), 10u);
    for (std::size_t j = 0; j < 10; ++j) max_diff = std::max(max_diff, std::fabs(q[i][j] - ref[i][j]));
    agree += std::max_element(q[i].begin(), q[i].end()) - q[i].begin() ==
             std::max_element(ref[i].begin(), ref[i].end()) - ref[i].begin();
  }
  EXPECT_GT(max_diff, 1e-3) << "the quantized run must differ from fp32";
  EXPECT_LT(max_diff, 2.0);
  EXPECT_GE(agree, 120) << "of 128 predictions";
}

TEST_F(Fp8InferenceTest, QuantConfigSelectsTheModeAndTheStatisticsPath) {
  const std::string ckpt = trained();
  write("measure.json", R"({"mode": "MEASURE", "dump_stats_path": "./stats/run"})");
  env()["QUANT_CONFIG"] = (dir() / "measure.json").string();
  const RunResult measure = predict(ckpt, fp8(true));  // QUANT_CONFIG's mode wins over quant
  ASSERT_EQ(measure.exit_code, 0) << measure.describe();
  EXPECT_TRUE(std::filesystem::exists(dir() / "stats/run.json"));
  EXPECT_FALSE(std::filesystem::exists(dir() / "hqt_output/measure.json"));

  write("quant.json", R"({"mode": "QUANTIZE", "dump_stats_path": "./stats/run"})");
  env()["QUANT_CONFIG"] = (dir() / "quant.json").string();
  const RunResult quant = predict(ckpt, fp8(false));
  EXPECT_EQ(quant.exit_code, 0) << quant.describe();

  write("bad.json", R"({"mode": "CALIBRATE"})");
  env()["QUANT_CONFIG"] = (dir() / "bad.json").string();
  const RunResult bad = predict(ckpt, fp8(false));
  EXPECT_EQ(bad.exit_code, 2) << bad.describe();
  EXPECT_NE(bad.err.find("mode 'CALIBRATE' is not MEASURE or QUANTIZE"), std::string::npos) << bad.err;
}

TEST_F(Fp8InferenceTest, AModelWithoutLinearLayersIsReportedNotSilentlyLeftAlone) {
  const std::string model = write("conv_only.yaml", R"(
model:
  class_path: Sequential
  init_args:
    layers:
      - {class_path: Conv2d, init_args: {out_channels: 10, kernel_size: 28}}
      - Flatten
)");
  const RunResult r = run({"predict", "-c", fashionConfig(), "-c", model, "--trainer.enable_progress_bar=false",
                           "--trainer.limit_predict_batches=1",
                           "--trainer.plugins+=lightning_habana.pytorch.plugins.precision.HPUPrecisionPlugin",
                           "--trainer.plugins.precision=fp8", "--trainer.plugins.inference=true",
                           "--trainer.plugins.quant=false"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("precision fp8: the model has no Linear layer to measure; it runs in bf16 as without fp8"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace hpu::cli::testing
