#include "hpu/core/precision/precision.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "hpu/core/base/errors.h"
#include "hpu/core/base/file_io.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/ops/autocast.h"
#include "hpu/core/precision/fp8.h"
#include "hpu/device/errors.h"
#include "hpu/device/numerics.h"

namespace hpu::core {
namespace {

using nlohmann::json;

[[noreturn]] void requireGaudi2(const device::Device& dev, const char* format) {
  throw device::UnsupportedDTypeError(
      fmt::format("{}: {} not supported on Gaudi, Gaudi2 or higher required", dev.name(), format));
}

// The batch's floating fields in `dtype` (integer fields, token ids and
// labels, stay as they are).
void convertFloatFields(Batch& batch, DType dtype) {
  for (auto& [name, t] : batch)
    if (t.dtype() == DType::kFloat32) t = Tensor::fromHost(t.device(), t.shape(), t.values(), dtype);
}

class FullPrecision final : public PrecisionPlugin {
 public:
  std::string precision() const override { return "32-true"; }
};

// Autocast to bf16 or fp16; fp16 adds dynamic loss scaling (LossScalerOptions:
// by default torch.cuda.amp.GradScaler's init 2^16, growth x2 every 2000 clean
// steps, backoff x0.5 at each overflow).
class MixedPrecision : public PrecisionPlugin {
 public:
  explicit MixedPrecision(DType dtype, const LossScalerOptions& scaler = {})
      : dtype_(dtype), options_(scaler), scale_(scaler.initial_scale), hysteresis_left_(scaler.hysteresis) {}
  std::string precision() const override { return dtype_ == DType::kFloat16 ? "16-mixed" : "bf16-mixed"; }
  void checkDevice(const device::Device& dev) const override {
    if (dtype_ == DType::kFloat16 && !device::supports(dev.spec(), DType::kFloat16)) requireGaudi2(dev, "FP16");
  }
  std::shared_ptr<void> forwardContext() override { return std::make_shared<autocast::Scope>(true, dtype_); }
  float lossScale() const override { return dtype_ == DType::kFloat16 ? scale_ : 1.0f; }

  bool prepareStep(const optim::GradientView& grads) override {
    if (dtype_ != DType::kFloat16) return true;
    ++steps_;
    const float inv = 1.0f / scale_;
    double non_finite = 0;
    for (std::span<float> span : grads.spans)
      for (float& g : span) {
        g *= inv;
        non_finite += std::isfinite(g) ? 0.0 : 1.0;
      }
    const bool finite = grads.total(non_finite) == 0.0;
    if (!finite) {
      ++skipped_;
      growth_tracker_ = 0;
      if (options_.dynamic && --hysteresis_left_ <= 0) {
        scale_ = std::max(scale_ * kBackoff, options_.min_scale);
        hysteresis_left_ = options_.hysteresis;
      }
      spdlog::info("16-mixed: non-finite gradients in step {}; skipped it (loss scale {})", steps_, scale_);
      return false;
    }
    if (options_.dynamic && ++growth_tracker_ == options_.growth_interval) {
      scale_ *= kGrowth;
      growth_tracker_ = 0;
      hysteresis_left_ = options_.hysteresis;
      spdlog::debug("16-mixed: {} clean steps; raised the loss scale to {}", options_.growth_interval, scale_);
    }
    return true;
  }
  std::string summary() const override {
    if (dtype_ != DType::kFloat16 || steps_ == 0) return "";
    return fmt::format("16-mixed loss scaling: {} of {} steps skipped for non-finite gradients; loss scale now {}\n",
                       skipped_, steps_, scale_);
  }
  std::string stateJson() const override {
    if (dtype_ != DType::kFloat16) return "";
    return json{{"scale", scale_},
                {"growth_tracker", growth_tracker_},
                {"hysteresis_left", hysteresis_left_},
                {"skipped", skipped_},
                {"steps", steps_}}
        .dump();
  }
  void loadStateJson(const std::string& text) override {
    if (text.empty() || dtype_ != DType::kFloat16) return;
    const json j = json::parse(text);
    scale_ = j.value("scale", scale_);
    growth_tracker_ = j.value("growth_tracker", 0);
    hysteresis_left_ = j.value("hysteresis_left", options_.hysteresis);
    skipped_ = j.value("skipped", 0);
    steps_ = j.value("steps", 0);
  }

 protected:
  DType dtype_;

 private:
  static constexpr float kGrowth = 2.0f, kBackoff = 0.5f;
  LossScalerOptions options_;
  float scale_;
  int growth_tracker_ = 0;
  int hysteresis_left_;
  std::int64_t skipped_ = 0, steps_ = 0;
};

// bf16 weights, inputs and ops (Lightning's "bf16-true").
class TruePrecision final : public PrecisionPlugin {
 public:
  std::string precision() const override { return "bf16-true"; }
  DType paramDtype() const override { return DType::kBFloat16; }
  void convertInput(Batch& batch) override { convertFloatFields(batch, DType::kBFloat16); }
};

// A plugin under a strategy that holds the model in the half type and takes
// inputs in it (holdingHalfModel; Lightning's DeepSpeedPrecision); the rest
// is the plugin's own.
class HalfModelPrecision final : public PrecisionPlugin {
 public:
  HalfModelPrecision(std::unique_ptr<PrecisionPlugin> plugin, DType model)
      : plugin_(std::move(plugin)), model_(model) {}
  std::string precision() const override { return plugin_->precision(); }
  void checkDevice(const device::Device& dev) const override { plugin_->checkDevice(dev); }
  DType paramDtype() const override { return model_; }
  void convertModule(LightningModule& model) override { plugin_->convertModule(model); }
  void convertInput(Batch& batch) override { convertFloatFields(batch, model_); }
  std::shared_ptr<void> forwardContext() override { return plugin_->forwardContext(); }
  float lossScale() const override { return plugin_->lossScale(); }
  bool prepareStep(const optim::GradientView& grads) override { return plugin_->prepareStep(grads); }
  void beforeOptimizerStep(const RankCollectives& ranks) override { plugin_->beforeOptimizerStep(ranks); }
  void onRunEnd(bool is_global_zero, const std::function<void(std::span<double>)>& max_over_ranks) override {
    plugin_->onRunEnd(is_global_zero, max_over_ranks);
  }
  std::string summary() const override { return plugin_->summary(); }
  std::string stateJson() const override { return plugin_->stateJson(); }
  void loadStateJson(const std::string& text) override { plugin_->loadStateJson(text); }

 private:
  std::unique_ptr<PrecisionPlugin> plugin_;
  DType model_;
};

// Process-wide: measurement and quantization cannot share a process (the
// real toolkit's hooks cannot be removed once installed).
std::atomic<int> g_fp8_inference_mode{0};  // 0 none, 1 measure, 2 quantize

class Fp8Precision final : public MixedPrecision {
 public:
  explicit Fp8Precision(Fp8Options o) : MixedPrecision(DType::kBFloat16), o_(std::move(o)) {
    if (!o_.inference && !o_.replace_layers)
      throw UsageError(
          "precision fp8 computes in fp8 only inside converted layers: set replace_layers: true "
          "(HPUPrecisionPlugin.convert_modules(model, replace_layers=True)), or inference: true");
    if (o_.inference) resolveQuantConfig();
  }
  std::string precision() const override { return "fp8"; }
  // fp8 inference quantizes a bf16 model (Intel Neural Compressor's fp8 flow
  // takes one, as Optimum Habana's runs load it with --bf16): the layers it
  // leaves alone, and the activations between layers, are bf16.
  DType paramDtype() const override { return o_.inference ? DType::kBFloat16 : DType::kFloat32; }
  void checkDevice(const device::Device& dev) const override {
    if (!device::supports(dev.spec(), DType::kFloat8E4M3)) requireGaudi2(dev, "FP8");
  }

  void convertModule(LightningModule& model) override {
    if (!o_.inference) {
      const int n = fp8::convertForTraining(model, o_, model.modulesToNotConvert());
      if (n == 0) spdlog::warn("precision fp8: the model has no Linear layer to run in fp8");
      model_ = &model;
      return;
    }
    const int mode = quant_ ? 2 : 1;
    int expected = 0;
    if (!g_fp8_inference_mode.compare_exchange_strong(expected, mode) && expected != mode)
      throw UsageError(
          "Measurement mode and Quantization mode cannot be run in single process. Please run in measurement "
          "mode first, followed by quantization mode.");
    stats_ = std::make_shared<fp8::Stats>();
    // A dry run (estimate) quantizes without values: it needs no measurements.
    const bool dry_run = !model.parameters().empty() && model.parameters().front().shapeOnly();
    if (quant_ && !dry_run) {
      if (!std::filesystem::exists(stats_path_))
        throw UsageError(
            fmt::format("fp8 quantization needs the measurements in {}; run predict with "
                        "HPUPrecisionPlugin(inference: true, quant: false) first",
                        stats_path_));
      *stats_ = fp8::Stats::fromJson(readFile(stats_path_), stats_path_);
    }
    if (fp8::convertForInference(model, quant_, stats_, model.modulesToNotConvert()) == 0)
      spdlog::warn("precision fp8: the model has no Linear layer to {}; it runs in bf16 as without fp8",
                   quant_ ? "quantize" : "measure");
    // The toolkit quantizes the KV cache too: keys and values are stored as
    // E4M3 at unit scale (they lie inside its normal range, 2^-6 .. 448,
    // where a scale changes no relative precision).
    if (quant_) model.setKVCacheDtype(DType::kFloat8E4M3);
  }

  // Transformer Engine's amax reduction: a layer's amax is the max over
  // every rank holding a piece or a replica of it (tensor- and data-parallel
  // ranks; an expert's ranks), so all of them move its scales alike: the
  // scales of one device, and one copy in a checkpoint serves every layout.
  // Ranks know a layer by its checkpoint key; the first step learns every
  // rank's keys (pipeline stages and expert ranks hold different layers).
  void beforeOptimizerStep(const RankCollectives& ranks) override {
    if (model_ == nullptr) return;
    if (!slots_known_) learnSlots(ranks);
    std::vector<double> amax(fp8::ScaledLayer::kTensors * slot_count_, 0.0);
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      const auto mine = layers_[i]->stepAmax();
      std::copy(mine.begin(), mine.end(), amax.begin() + static_cast<std::ptrdiff_t>(slots_[i] * mine.size()));
    }
    ranks.max(amax);
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      std::array<float, fp8::ScaledLayer::kTensors> reduced{};
      for (std::size_t t = 0; t < reduced.size(); ++t)
        reduced[t] = static_cast<float>(amax[slots_[i] * reduced.size() + t]);
      layers_[i]->moveScales(reduced);
    }
  }

  void onRunEnd(bool is_global_zero, const std::function<void(std::span<double>)>& max_over_ranks) override {
    if (!o_.inference || quant_ || !stats_) return;
    // Every rank's measurements together: its prompts, and under tensor
    // parallelism its pieces of the layers, as one device measures the
    // whole (the layers' paths are the same on every rank).
    std::vector<double> all;
    for (const auto* m : {&stats_->inputs, &stats_->weights})
      for (const auto& [path, amax] : *m) all.push_back(amax);
    max_over_ranks(all);
    std::size_t i = 0;
    for (auto* m : {&stats_->inputs, &stats_->weights})
      for (auto& [path, amax] : *m) amax = static_cast<float>(all[i++]);
    if (is_global_zero) {
      writeFileAtomically(stats_path_, stats_->toJson());
      spdlog::info("fp8 measurement: wrote the statistics of {} layers to {}", stats_->inputs.size(), stats_path_);
    }
  }

 private:
  // QUANT_CONFIG (a JSON with "mode": MEASURE|QUANTIZE and "dump_stats_path")
  // overrides the plugin's quant flag and the default statistics path.
  void resolveQuantConfig() {
    quant_ = o_.quant;
    std::string dump = (std::filesystem::path(o_.default_stats_dir) / "hqt_output" / "measure").string();
    if (!o_.quant_config.empty()) {
      const std::string text = readFile(o_.quant_config);
      const json j = json::parse(text, nullptr, false);
      if (!j.is_object() || !j.contains("mode"))
        throw UsageError(fmt::format(
            "QUANT_CONFIG={}: expected a JSON object with \"mode\": \"MEASURE\" or \"QUANTIZE\"", o_.quant_config));
      const std::string mode = j["mode"].get<std::string>();
      if (mode != "MEASURE" && mode != "QUANTIZE")
        throw UsageError(fmt::format("QUANT_CONFIG={}: mode '{}' is not MEASURE or QUANTIZE", o_.quant_config, mode));
      quant_ = mode == "QUANTIZE";
      if (j.contains("dump_stats_path")) dump = j["dump_stats_path"].get<std::string>();
    }
    stats_path_ = dump + ".json";
  }

  // Every rank's layer keys, sorted: a layer's slot is its key's place.
  void learnSlots(const RankCollectives& ranks) {
    std::vector<std::string> keys;
    std::string mine;
    for (const auto& [path, layer] : fp8::scaledLayers(*model_)) {
      layers_.push_back(layer);
      keys.push_back(model_->checkpointKey(path + ".weight"));
      mine += keys.back() + "\n";
    }
    std::vector<std::string> all;
    for (const std::string& text : ranks.gather_text(mine))
      for (std::size_t from = 0, end; (end = text.find('\n', from)) != std::string::npos; from = end + 1)
        all.push_back(text.substr(from, end - from));
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    for (const std::string& key : keys)
      slots_.push_back(static_cast<std::size_t>(std::lower_bound(all.begin(), all.end(), key) - all.begin()));
    slot_count_ = all.size();
    slots_known_ = true;
  }

  Fp8Options o_;
  bool quant_ = true;
  std::string stats_path_;
  std::shared_ptr<fp8::Stats> stats_;
  // Training: the model's fp8 layers and their slots among every rank's.
  LightningModule* model_ = nullptr;
  std::vector<fp8::ScaledLayer*> layers_;
  std::vector<std::size_t> slots_;  // of layers_[i]
  std::size_t slot_count_ = 0;
  bool slots_known_ = false;
};

config::Type precisionType() { return config::Type::string(precisionNameList()); }

Fp8Options fp8OptionsFrom(const config::Params& p) {
  Fp8Options o;
  o.replace_layers = p.getBool("replace_layers");
  o.inference = p.getBool("inference");
  o.quant = p.getBool("quant");
  if (p.has("recipe")) {
    const config::Node& r = p.node("recipe");
    for (const auto& [key, value] : r.entries()) {
      if (key == "margin")
        o.margin = static_cast<int>(config::asInt(value));
      else if (key == "amax_history_len")
        o.amax_history_len = static_cast<int>(config::asInt(value));
      else if (key == "fp8_format") {
        if (value.str() != "HYBRID" && value.str() != "E4M3")
          p.fail("recipe", "fp8_format must be HYBRID or E4M3, not '" + value.str() + "'");
        o.hybrid = value.str() == "HYBRID";
      } else if (key == "interval" || key == "amax_compute_algo") {
        if (value.str() != (key == "interval" ? "1" : "max"))
          p.fail("recipe", key + ": only " + (key == "interval" ? "1" : "max") + " is supported");
      } else {
        p.fail("recipe", "unknown DelayedScaling key '" + key +
                             "' (margin, amax_history_len, fp8_format, interval, amax_compute_algo)");
      }
    }
    if (o.amax_history_len < 1) p.fail("recipe", "amax_history_len must be at least 1");
  }
  return o;
}

// The plugin a config names; the Trainer picks it up from trainer.plugins.
struct PrecisionChoice {
  std::string precision;
  Fp8Options fp8;
  bool deepspeed = false;  // DeepSpeedPrecisionPlugin / HPUDeepSpeedPrecisionPlugin
};

std::vector<config::ParamSpec> pluginParams() {
  using config::Type;
  return {
      {"precision", precisionType(), "32-true", "Precision: 32-true, bf16-mixed, bf16-true, 16-mixed, fp8."},
      {"device", Type::string({"hpu"}), "hpu", "Device type (always hpu)."},
      {"replace_layers", Type::boolean(), "true",
       "fp8 training: replace Linear layers with fp8 ones (convert_modules).", "", true},
      {"recipe", Type::optional(Type::dict()), "null",
       "fp8 DelayedScaling recipe: {margin: 0, amax_history_len: 1024, fp8_format: HYBRID|E4M3}.", "", true},
      {"inference", Type::boolean(), "false", "fp8 inference (convert_modules(inference=True)) instead of training.", "", true},
      {"quant", Type::boolean(), "true", "fp8 inference: quantize (true) or measure statistics (false).", "", true}};
}

HPU_REGISTER_COMPONENT(
    PrecisionChoice,
    config::ComponentSchema{
        config::ComponentKind::kPrecisionPlugin,
        "HPUPrecisionPlugin",
        "lightning_habana",
        {"HPUPrecisionPlugin", "", pluginParams()},
        "Mixed precision, fp8 training and fp8 inference on HPU."},
    [](const config::Params& p) {
      return std::make_unique<PrecisionChoice>(PrecisionChoice{p.getString("precision"), fp8OptionsFrom(p)});
    });

HPU_REGISTER_COMPONENT(PrecisionChoice,
                       config::ComponentSchema{
                           config::ComponentKind::kPrecisionPlugin,
                           "HPUDeepSpeedPrecisionPlugin",
                           "lightning_habana",
                           {"HPUDeepSpeedPrecisionPlugin", "", pluginParams()},
                           "The precision plugin of the DeepSpeed strategies.",
                           {"lightning.pytorch.plugins.DeepSpeedPrecision", "lightning.pytorch.plugins.DeepSpeedPrecisionPlugin"}},
                       [](const config::Params& p) {
                         return std::make_unique<PrecisionChoice>(
                             PrecisionChoice{p.getString("precision"), fp8OptionsFrom(p), /*deepspeed=*/true});
                       });

std::unique_ptr<PrecisionPlugin> makeFull(const Fp8Options&, const LossScalerOptions&) {
  return std::make_unique<FullPrecision>();
}
std::unique_ptr<PrecisionPlugin> makeBf16Mixed(const Fp8Options&, const LossScalerOptions&) {
  return std::make_unique<MixedPrecision>(DType::kBFloat16);
}
std::unique_ptr<PrecisionPlugin> makeFp16Mixed(const Fp8Options&, const LossScalerOptions& scaler) {
  return std::make_unique<MixedPrecision>(DType::kFloat16, scaler);
}
std::unique_ptr<PrecisionPlugin> makeBf16True(const Fp8Options&, const LossScalerOptions&) {
  return std::make_unique<TruePrecision>();
}
std::unique_ptr<PrecisionPlugin> makeFp8(const Fp8Options& fp8, const LossScalerOptions&) {
  return std::make_unique<Fp8Precision>(fp8);
}

}  // namespace

std::span<const PrecisionName> precisionNames() {
  static constexpr PrecisionName kNames[] = {
      {"32", "32-true", makeFull},
      {"32-true", "32-true", makeFull},
      {"bf16", "bf16-mixed", makeBf16Mixed},
      {"bf16-mixed", "bf16-mixed", makeBf16Mixed},
      {"bf16-true", "bf16-true", makeBf16True},
      {"16", "16-mixed", makeFp16Mixed},
      {"16-mixed", "16-mixed", makeFp16Mixed},
      {"fp8", "fp8", makeFp8},
  };
  return kNames;
}

std::vector<std::string> precisionNameList() {
  std::vector<std::string> out;
  for (const PrecisionName& n : precisionNames()) out.emplace_back(n.name);
  return out;
}

std::unique_ptr<PrecisionPlugin> makePrecisionPlugin(const std::string& name, const Fp8Options& fp8,
                                                     const LossScalerOptions& scaler) {
  const auto names = precisionNames();
  const auto it = std::find_if(names.begin(), names.end(), [&](const PrecisionName& n) { return n.name == name; });
  if (it == names.end()) {
    std::string list;
    for (const auto& n : precisionNames()) list += (list.empty() ? "" : ", ") + std::string(n.name);
    throw ConfigError("trainer.precision: '" + name + "' is not one of " + list);
  }
  return it->make(fp8, scaler);
}

std::unique_ptr<PrecisionPlugin> holdingHalfModel(std::unique_ptr<PrecisionPlugin> plugin) {
  const std::string p = plugin->precision();
  if (p == "16-mixed") return std::make_unique<HalfModelPrecision>(std::move(plugin), DType::kFloat16);
  if (p == "bf16-mixed" || p == "bf16-true" || p == "fp8")
    return std::make_unique<HalfModelPrecision>(std::move(plugin), DType::kBFloat16);
  return plugin;
}

std::unique_ptr<PrecisionPlugin> makePrecisionFromPlugin(const config::Node& component, const std::string& path,
                                                         const std::string& default_stats_dir, bool deepspeed_strategy,
                                                         const std::string& quant_config) {
  auto choice = config::ComponentFactory<PrecisionChoice>::instance().create(component, path);
  if (choice->deepspeed && !deepspeed_strategy)
    throw UsageError(
        path + ": " + component.find("class_path")->str() +
        " works with the DeepSpeed strategies (trainer.strategy: hpu_deepspeed...); use HPUPrecisionPlugin");
  choice->fp8.default_stats_dir = default_stats_dir;
  choice->fp8.quant_config = quant_config;
  return makePrecisionPlugin(choice->precision, choice->fp8);
}

}  // namespace hpu::core
