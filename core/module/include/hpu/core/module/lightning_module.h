// The model API: a LightningModule describes its network (configureModel),
// what one step of each stage does (trainingStep, validationStep, testStep,
// predictStep) and its default optimizer (configureOptimizers). The Trainer
// calls these; model code logs metrics with log() as Lightning's self.log.
//
// To add a model, subclass LightningModule and register it under a name
// with HPU_REGISTER_COMPONENT(LightningModule, schema, factory): it is then
// selectable from YAML (model: {class_path: Name, init_args: {...}}), shows
// in --help and validates its init_args. examples/custom_model.cc is one.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>

#include "hpu/core/data/dataset.h"
#include "hpu/core/data/tokenizer.h"
#include "hpu/core/nn/module.h"
#include "hpu/core/ops/ops.h"
#include "hpu/core/optim/lr_scheduler.h"
#include "hpu/core/optim/optimizer.h"

namespace hpu::core {

class Profiler;

// A batch on the device: the data set's fields by name, each [N, ...] in
// its dtype (classification data: float features "x" and int64 labels "y";
// text: int64 "input_ids" and "labels").
class Batch : public TensorDict {
 public:
  using TensorDict::TensorDict;
  // N, the leading dimension of the first field.
  std::int64_t size() const { return front().second.size(0); }
};

// What the data tells a model about its inputs.
struct ModelInput {
  Shape sample_shape;                                // of the first field: {1, 28, 28} (classification features)
  std::int64_t num_classes = 0;                      // 0 when the data is not labelled
  std::vector<data::Field> fields;                   // of one sample, as the data set declares them
  std::shared_ptr<const data::Tokenizer> tokenizer;  // text data: ids <-> text (null otherwise)
};

// What predict_step returns for a batch, one entry per sample: numeric
// outputs (a classifier's logits), or generated text.
struct Prediction {
  Tensor rows;  // [N, ...]: row i is sample i's output (undefined for text)
  struct Text {
    std::string prompt;
    std::string completion;
    std::vector<std::int64_t> token_ids;  // of the completion
  };
  std::vector<Text> texts;
  std::int64_t size() const { return rows.defined() ? rows.size(0) : static_cast<std::int64_t>(texts.size()); }
};

struct OptimizerConfig {
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<optim::LRScheduler> scheduler;  // optional
};

struct LogOptions {
  // Unset: Lightning's defaults for the hook (training_step: per step;
  // validation/test steps: per epoch, averaged weighted by batch size).
  std::optional<bool> on_step{};
  std::optional<bool> on_epoch{};
  bool prog_bar = false;   // show in the progress bar
  bool sync_dist = false;  // average across ranks when logged per step
};

// Where log() goes; the Trainer implements it.
class MetricSink {
 public:
  virtual ~MetricSink() = default;
  virtual void log(const std::string& name, double value, const LogOptions& options) = 0;
};

class LightningModule : public nn::Module {
 public:
  // Builds the network on ctx.device for inputs described by `input`.
  virtual void configureModel(nn::InitContext& ctx, const ModelInput& input) = 0;

  // Returns the loss to minimise.
  virtual Tensor trainingStep(const Batch& batch, std::int64_t batch_idx) = 0;
  virtual void validationStep(const Batch& batch, std::int64_t batch_idx) {}
  virtual void testStep(const Batch& batch, std::int64_t batch_idx) {}
  // Default: the rows of forward() on the batch.
  virtual Prediction predictStep(const Batch& batch, std::int64_t batch_idx);
  // What predict runs over when the model brings its own (Lightning's
  // predict_dataloader on the module: a language model's prompts); null:
  // the data module's predict set. Called after configureModel.
  virtual std::shared_ptr<const data::Dataset> predictData() { return nullptr; }
  // Module paths that reduced-precision conversions (fp8 layers) leave as
  // they are (Hugging Face's modules_to_not_convert; a language model's
  // lm_head).
  virtual std::set<std::string> modulesToNotConvert() const { return {}; }
  // Stores the keys and values of generation's KV cache in `dtype` (fp8
  // quantization does); returns false for a model without one.
  virtual bool setKVCacheDtype(DType) { return false; }
  // The name of parameter or buffer `name` in checkpoints: "model.<name>";
  // a model that follows another library's layout (Hugging Face's) keeps
  // that layout's names, so its checkpoints map onto it 1:1.
  virtual std::string checkpointKey(const std::string& name) const { return "model." + name; }
  // The modules that form the network's backbone (Lightning's
  // `self.backbone`, which BackboneFinetuning freezes and later trains with
  // an lr of its own); empty when the model names none.
  virtual std::vector<nn::Module*> backbone() { return {}; }
  // The floating-point operations of one training step on a batch of
  // `batch_size` samples (forward and backward), for ThroughputMonitor's
  // FLOP/s and MFU; none when the model does not say.
  virtual std::optional<double> flopsPerBatch(std::int64_t batch_size) const { return std::nullopt; }
  // The optimizer (and scheduler) used when the config names none.
  virtual OptimizerConfig configureOptimizers();
  // With InitContext::defer_trainable_values: copies elements [first,
  // first + out.size()) of trainable parameter `param`'s values (this rank's
  // piece of it, as its shard says) from where the model loads them (a
  // pretrained directory) into `out`, reading only those; false when the
  // model left no values of `param` to fill.
  virtual bool fillDeferredParameter(const nn::NamedTensor& /*param*/, std::int64_t /*first*/,
                                     std::span<float> /*out*/) {
    return false;
  }
  // Every deferred parameter has been filled (the model may let go of its files).
  virtual void deferredParametersFilled() {}

  // A shape-only scalar (a dry run's) is not logged: it has no value.
  void log(const std::string& name, const Tensor& scalar, const LogOptions& options = {});
  void log(const std::string& name, double value, const LogOptions& options = {});

  // Custom profiling regions (profiler().profile("name") scopes); always
  // valid, a no-op profiler when none is configured.
  Profiler& profiler();

  // The device the model computes on (Lightning's LightningModule.device):
  // where its inputs go: the Trainer's (under ZeRO-3 a parameter holds no
  // storage, and so no device, until its module's forward gathers it), or,
  // for a model used without a Trainer, its parameters'.
  device::Device& device() const;

  // Trainer wiring.
  void attachTrainer(MetricSink* sink, Profiler* profiler, device::Device& device) {
    sink_ = sink;
    profiler_ = profiler;
    device_ = &device;
  }

 private:
  MetricSink* sink_ = nullptr;
  Profiler* profiler_ = nullptr;
  device::Device* device_ = nullptr;
};

}  // namespace hpu::core
