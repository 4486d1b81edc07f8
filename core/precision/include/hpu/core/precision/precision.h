// Precision plugins own numeric precision: the dtype parameters are kept in,
// the autocast policy during forward, input conversion, loss scaling, the
// decision to skip a step whose gradients overflowed, and module rewrites
// (fp8 layers). One is chosen by trainer.precision or an HPUPrecisionPlugin
// in trainer.plugins:
//   32-true     everything in fp32
//   bf16-mixed  autocast to bf16 (matmul-like ops), fp32 master weights
//   bf16-true   bf16 weights, inputs and ops
//   16-mixed    autocast to fp16 with dynamic loss scaling (Gaudi2+)
//   fp8         Linear layers in fp8 with delayed scaling, the rest bf16 autocast;
//               or fp8 inference (measure, then quantize) (Gaudi2+)
#pragma once

#include <functional>
#include <span>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hpu/core/config/node.h"
#include "hpu/core/module/lightning_module.h"
#include "hpu/core/precision/loss_scaling.h"
#include "hpu/core/optim/gradient_view.h"

namespace hpu::core {

// Collectives over every rank of the job, for state a plugin keeps alike on
// all of them. Every rank calls them alike, in the same order.
struct RankCollectives {
  // Every rank's text, in rank order.
  std::function<std::vector<std::string>(const std::string&)> gather_text = [](const std::string& t) {
    return std::vector<std::string>{t};
  };
  // The elementwise max over the ranks, in place.
  std::function<void(std::span<double>)> max = [](std::span<double>) {};
};

class PrecisionPlugin {
 public:
  virtual ~PrecisionPlugin() = default;
  // Canonical name: "32-true", "bf16-mixed", ...
  virtual std::string precision() const = 0;
  // Refuses generations that lack the format (fp16/fp8 on first-gen Gaudi).
  virtual void checkDevice(const device::Device&) const {}
  // Dtype of parameters (master weights stay fp32 unless "-true").
  virtual DType paramDtype() const { return DType::kFloat32; }
  // Rewrites the model's modules once it is built (fp8 layers).
  virtual void convertModule(LightningModule&) {}
  // Converts a batch's floating fields on the device (bf16-true: to bf16).
  virtual void convertInput(Batch&) {}
  // Installs the autocast policy for forward until the handle is destroyed.
  virtual std::shared_ptr<void> forwardContext() { return nullptr; }
  // Factor the loss gradient is seeded with (dynamic loss scaling).
  virtual float lossScale() const { return 1.0f; }
  // After backward and gradient synchronisation: unscales gradients and
  // returns false when the step must be skipped (non-finite gradients on
  // any rank).
  virtual bool prepareStep(const optim::GradientView&) { return true; }
  // Before each optimizer step of training, prepareStep's included: fp8
  // layers take the step's amax, reduced over the ranks holding each layer,
  // into their windows and move their scales.
  virtual void beforeOptimizerStep(const RankCollectives&) {}
  // End of a fit/validate/test/predict run (fp8 measurement writes its
  // statistics, the max over every rank's: `max_over_ranks` replaces values
  // by their elementwise max over the ranks, which all call it alike).
  virtual void onRunEnd(bool is_global_zero, const std::function<void(std::span<double>)>& max_over_ranks) {}
  // A line for the end-of-run report ("" for none).
  virtual std::string summary() const { return ""; }
  // State carried in checkpoints, as JSON text ("" for none).
  virtual std::string stateJson() const { return ""; }
  virtual void loadStateJson(const std::string&) {}
};

// fp8 settings: Transformer Engine's DelayedScaling recipe and the two-step
// inference flow.
struct Fp8Options {
  bool replace_layers = true;      // convert Linear layers to fp8 (training)
  int margin = 0;                  // scale = fp8_max / amax / 2^margin
  int amax_history_len = 1024;     // amax window the scale is computed from
  bool hybrid = true;              // HYBRID: E4M3 forward, E5M2 gradients; else E4M3 both
  bool inference = false;          // fp8 inference instead of training
  bool quant = true;               // inference: quantize (true) or measure (false)
  std::string quant_config;        // QUANT_CONFIG: JSON selecting mode and stats path
  std::string default_stats_dir;   // where measurements go without a QUANT_CONFIG
};

// The names trainer.precision accepts, Lightning's short forms among them:
// the one table that the config schema, --help, errors and
// makePrecisionPlugin read.
struct PrecisionName {
  std::string_view name;       // as written in a config: "bf16"
  std::string_view precision;  // the plugin it selects (its precision()): "bf16-mixed"
  std::unique_ptr<PrecisionPlugin> (*make)(const Fp8Options&, const LossScalerOptions&);
};
std::span<const PrecisionName> precisionNames();
// Every name, in table order ("32", "32-true", "bf16", ...).
std::vector<std::string> precisionNameList();

// The plugin `precision` names. Throws ConfigError listing the valid names
// for an unknown one.
std::unique_ptr<PrecisionPlugin> makePrecisionPlugin(const std::string& precision, const Fp8Options& fp8 = {},
                                                     const LossScalerOptions& scaler = {});

// `plugin` as a strategy that holds the model in half precision runs it
// (Strategy::holdsHalfModel: the DeepSpeed strategies, Lightning's
// DeepSpeedPrecision; ZeRO-1 under ModelParallelStrategy): the model is held
// in bf16 under bf16-mixed, bf16-true and fp8, in fp16 under 16-mixed, and
// floating inputs are converted to that type; autocast, loss scaling and fp8
// layers stay the plugin's. 32-true comes back as it is.
std::unique_ptr<PrecisionPlugin> holdingHalfModel(std::unique_ptr<PrecisionPlugin> plugin);

// The plugin a trainer.plugins entry (HPUPrecisionPlugin,
// HPUDeepSpeedPrecisionPlugin) selects, with fp8's statistics directory and
// QUANT_CONFIG. Throws UsageError for the DeepSpeed plugin without a
// DeepSpeed strategy.
std::unique_ptr<PrecisionPlugin> makePrecisionFromPlugin(const config::Node& component, const std::string& path,
                                                         const std::string& default_stats_dir, bool deepspeed_strategy,
                                                         const std::string& quant_config);

}  // namespace hpu::core
