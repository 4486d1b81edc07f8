// BasePredictionWriter: writes what predictStep returns, on global rank 0,
// into output_dir (default: the run's log directory):
//  - numeric rows (a classifier's logits) to predictions.csv:
//      index,prediction,output_0,output_1,...   (prediction: the arg-max)
//    and, whole, to predictions.safetensors: "outputs" (float32 [N, width])
//    and "prediction" (int64 [N]), which numpy, torch and safetensors load;
//  - generated text to predictions.jsonl, one object per prompt:
//      {"prompt": ..., "completion": ..., "token_ids": [...]}
// write_interval "batch" rewrites the file (atomically) after every batch, so
// a stopped run keeps what it predicted; "epoch" writes once at the end.
// Generated text is also printed, prompt and completion, as it comes.
#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "hpu/core/base/file_io.h"
#include "hpu/core/checkpoint/checkpoint.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/trainer/trainer.h"

namespace hpu::core {
namespace {

class PredictionWriter final : public Callback {
 public:
  PredictionWriter(std::string output_dir, std::string interval)
      : output_dir_(std::move(output_dir)), interval_(std::move(interval)) {}
  std::string stateKey() const override { return "BasePredictionWriter"; }

  void onPredictStart(Trainer&) override {
    csv_.clear();
    jsonl_.clear();
    outputs_.clear();
    argmax_.clear();
    rows_ = texts_ = 0;
  }

  void onPredictBatchEnd(Trainer& trainer, const Prediction& outputs, std::int64_t) override {
    if (!trainer.isGlobalZero()) return;
    // Generated text is shown as it comes: the prompt and its completion.
    for (const Prediction::Text& t : outputs.texts) std::printf("%s%s\n", t.prompt.c_str(), t.completion.c_str());
    append(outputs);
    if (interval_ != "epoch") write(trainer, false);
  }

  void onPredictEnd(Trainer& trainer) override {
    if (trainer.isGlobalZero()) write(trainer, true);
  }

 private:
  void append(const Prediction& p) {
    if (p.rows.defined() && !p.rows.shapeOnly()) {
      const std::int64_t n = p.rows.size(0), width = p.rows.numel() / std::max<std::int64_t>(1, n);
      if (csv_.empty()) {
        csv_ = "index,prediction";
        for (std::int64_t j = 0; j < width; ++j) csv_ += fmt::format(",output_{}", j);
        csv_ += "\n";
      }
      const float* v = p.rows.data();
      width_ = width;
      outputs_.insert(outputs_.end(), v, v + n * width);
      for (std::int64_t r = 0; r < n; ++r, ++rows_) {
        const float* row = v + r * width;
        argmax_.push_back(std::max_element(row, row + width) - row);
        csv_ += fmt::format("{},{}", rows_, argmax_.back());
        for (std::int64_t j = 0; j < width; ++j) csv_ += fmt::format(",{}", row[j]);
        csv_ += "\n";
      }
    }
    for (const Prediction::Text& t : p.texts) {
      jsonl_ += nlohmann::json{{"prompt", t.prompt}, {"completion", t.completion}, {"token_ids", t.token_ids}}.dump(
                    -1, ' ', false, nlohmann::json::error_handler_t::replace) +
                "\n";
      ++texts_;
    }
  }

  void write(Trainer& trainer, bool final) {
    const std::filesystem::path dir = output_dir_.empty() ? trainer.logDir() : output_dir_;
    const auto save = [&](const char* name, const std::string& text, std::int64_t count) {
      const std::string path = (dir / name).string();
      writeFileAtomically(path, text);
      if (final) std::printf("wrote %lld predictions to %s\n", static_cast<long long>(count), path.c_str());
    };
    if (rows_ > 0 || (texts_ == 0 && final)) save("predictions.csv", csv_.empty() ? "index,prediction\n" : csv_, rows_);
    if (rows_ > 0) {
      checkpoint::Checkpoint tensors;
      tensors.tensors.push_back({"outputs", DType::kFloat32, {rows_, width_}, outputs_, {}});
      tensors.tensors.push_back({"prediction", DType::kInt64, {rows_}, {}, argmax_});
      save("predictions.safetensors", checkpoint::encodeSafetensors(tensors), rows_);
    }
    if (texts_ > 0) save("predictions.jsonl", jsonl_, texts_);
    if (final) std::fflush(stdout);
  }

  std::string output_dir_, interval_;
  std::string csv_, jsonl_;
  std::int64_t rows_ = 0, texts_ = 0, width_ = 0;
  std::vector<float> outputs_;
  std::vector<std::int64_t> argmax_;
};

HPU_REGISTER_COMPONENT(
    Callback,
    config::ComponentSchema{
        config::ComponentKind::kCallback,
        "BasePredictionWriter",
        "lightning.pytorch.callbacks",
        {"BasePredictionWriter",
         "",
         {{"output_dir", config::Type::optional(config::Type::string()), "null",
           "Directory of predictions.csv / .safetensors / .jsonl (null: the run's log directory)."},
          {"write_interval", config::Type::string({"batch", "epoch", "batch_and_epoch"}), "batch",
           "Write after every batch (the file grows, atomically) or once at the end."}}},
        "Writes predict's outputs: numeric rows to predictions.csv and predictions.safetensors, generated text to "
        "predictions.jsonl "
        "(added to predict when no writer is configured)."},
    [](const config::Params& p) {
      return std::make_unique<PredictionWriter>(p.has("output_dir") ? p.getString("output_dir") : "",
                                                p.getString("write_interval"));
    });

}  // namespace
}  // namespace hpu::core
