// BasePredictionWriter: writes what predictStep returns on every
// data-parallel rank, gathered by global rank 0 in the data set's order
// (rank r predicted samples r, r + N, ...; the repeats that pad the last
// ranks' shares are dropped), into output_dir (default: the run's log
// directory):
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
    rows_ = texts_ = seen_ = 0;
  }

  void onPredictBatchEnd(Trainer& trainer, const Prediction& outputs, std::int64_t) override {
    const std::vector<Prediction> replicas = gather(trainer, outputs);
    if (!trainer.isGlobalZero()) return;
    // Row j of every replica's batch in turn: the data set's order.
    std::size_t rows = 0;
    for (const Prediction& p : replicas) rows = std::max(rows, static_cast<std::size_t>(p.size()));
    for (std::size_t j = 0; j < rows; ++j)
      for (const Prediction& p : replicas) {
        if (j >= static_cast<std::size_t>(p.size())) continue;
        if (seen_++ >= trainer.predictSamples()) continue;  // a repeat padding the last ranks' shares
        // Generated text is shown as it comes: the prompt and its completion.
        if (!p.texts.empty())
          std::printf("%s%s\n", p.texts[j].prompt.c_str(), p.texts[j].completion.c_str());
        append(p, j);
      }
    if (interval_ != "epoch") write(trainer, false);
  }

  void onPredictEnd(Trainer& trainer) override {
    if (trainer.isGlobalZero()) write(trainer, true);
  }

 private:
  // Every data-parallel replica's `mine`, in replica order (one device:
  // `mine` alone). Every rank calls it; the tensor-parallel ranks of a
  // replica hold the same outputs, its first rank's are kept.
  static std::vector<Prediction> gather(Trainer& trainer, const Prediction& mine) {
    Strategy& strategy = trainer.strategy();
    if (strategy.worldSize() == 1 || strategy.device().shapeOnly()) return {mine};
    nlohmann::json j{{"replica", strategy.dataParallelRank()}, {"texts", nlohmann::json::array()}};
    if (mine.rows.defined()) {
      j["shape"] = {mine.rows.size(0), mine.rows.numel() / std::max<std::int64_t>(1, mine.rows.size(0))};
      j["values"] = mine.rows.toHost();
    }
    for (const Prediction::Text& t : mine.texts)
      j["texts"].push_back({t.prompt, t.completion, t.token_ids});
    const std::vector<std::string> all =
        strategy.gatherText(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    std::vector<Prediction> out;
    for (const std::string& text : all) {
      const nlohmann::json part = nlohmann::json::parse(text);
      if (part["replica"].get<std::size_t>() != out.size()) continue;  // a later rank of a replica already kept
      Prediction p;
      if (part.contains("shape")) {
        const std::vector<std::int64_t> shape = part["shape"].get<std::vector<std::int64_t>>();
        p.rows = Tensor::fromHost(strategy.device(), Shape(std::span<const std::int64_t>(shape)),
                                  part["values"].get<std::vector<float>>());
      }
      for (const auto& t : part["texts"])
        p.texts.push_back({t[0].get<std::string>(), t[1].get<std::string>(), t[2].get<std::vector<std::int64_t>>()});
      out.push_back(std::move(p));
    }
    return out;
  }

  // Row `r` of `p`.
  void append(const Prediction& p, std::size_t r) {
    if (p.rows.defined() && !p.rows.shapeOnly()) {
      const std::int64_t n = p.rows.size(0), width = p.rows.numel() / std::max<std::int64_t>(1, n);
      if (csv_.empty()) {
        csv_ = "index,prediction";
        for (std::int64_t j = 0; j < width; ++j) csv_ += fmt::format(",output_{}", j);
        csv_ += "\n";
      }
      const float* row = p.rows.data() + static_cast<std::int64_t>(r) * width;
      width_ = width;
      outputs_.insert(outputs_.end(), row, row + width);
      argmax_.push_back(std::max_element(row, row + width) - row);
      csv_ += fmt::format("{},{}", rows_, argmax_.back());
      for (std::int64_t j = 0; j < width; ++j) csv_ += fmt::format(",{}", row[j]);
      csv_ += "\n";
      ++rows_;
    }
    if (r < p.texts.size()) {
      const Prediction::Text& t = p.texts[r];
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
  std::int64_t seen_ = 0;  // rows gathered so far, repeats included
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
           "Directory of predictions.csv / .safetensors / .jsonl (null: the run's log directory).", "", true},
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
