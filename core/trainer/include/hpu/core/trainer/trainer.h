// The Trainer owns the loops of fit / validate / test / predict and nothing
// else: the Strategy places and synchronises, the optimizer and scheduler
// update, callbacks and loggers observe through hooks, the CheckpointIO
// writes bytes. Semantics follow Lightning's Trainer (epochs, steps,
// limit_*_batches, val_check_interval, accumulation, clipping, sanity
// checks, fast_dev_run).
// Not thread-safe: one training thread per process.
#pragma once

#include <chrono>
#include <nlohmann/json_fwd.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "hpu/core/base/random.h"
#include "hpu/core/callbacks/callback.h"
#include "hpu/core/checkpoint/checkpoint_io.h"
#include "hpu/core/config/node.h"
#include "hpu/core/data/datamodule.h"
#include "hpu/core/loggers/logger.h"
#include "hpu/core/module/lightning_module.h"
#include "hpu/core/nn/flat_parameters.h"
#include "hpu/core/precision/precision.h"
#include "hpu/core/profilers/profiler.h"
#include "hpu/core/strategies/strategy.h"
#include "hpu/core/tensor/autograd.h"
#include "hpu/core/trainer/trainer_options.h"

namespace hpu::core {

class MetricCollector;

// Everything a Trainer is built from (run.cc assembles it from a config).
struct TrainerParts {
  TrainerOptions options;
  std::unique_ptr<Strategy> strategy;
  std::unique_ptr<PrecisionPlugin> precision;
  std::unique_ptr<checkpoint::CheckpointIO> checkpoint_io;
  std::unique_ptr<Profiler> profiler;
  std::vector<std::unique_ptr<Callback>> callbacks;
  std::vector<std::unique_ptr<Logger>> loggers;
  // The optimizer / scheduler from the config (null: the model's own).
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<optim::LRScheduler> scheduler;
  std::uint64_t seed = 0;
  config::Node config;  // the resolved config, saved in checkpoints
  // The elastic round (HPU_RESTART_COUNT, comm/elastic_agent.h): after a
  // restart (> 0) fit resumes from the newest complete checkpoint.
  int restart_round = 0;
};

class Trainer {
 public:
  explicit Trainer(TrainerParts parts);
  ~Trainer();

  void fit(LightningModule& model, data::DataModule& data, const std::string& ckpt_path);
  // Returns the logged metrics of the stage (val_*/test_*).
  std::map<std::string, double> validate(LightningModule& model, data::DataModule& data, const std::string& ckpt_path);
  std::map<std::string, double> test(LightningModule& model, data::DataModule& data, const std::string& ckpt_path);
  // Returns what predictStep returned for each batch (callbacks such as
  // BasePredictionWriter write them).
  std::vector<Prediction> predict(LightningModule& model, data::DataModule& data, const std::string& ckpt_path);
  // The samples of the data set predict runs on (each data-parallel rank
  // predicts every world-size-th, padded to as many as the others).
  std::int64_t predictSamples() const { return predict_samples_; }
  // Builds `model` as predict does and loads the weights of `ckpt_path`
  // (a path; "last" and "best" resolve as for predict), running nothing
  // (hpu-train export).
  void loadWeights(LightningModule& model, data::DataModule& data, const std::string& ckpt_path);

  // --- estimate: shape-only dry runs ---
  // REQUIRES: the strategy's device is shape-only. Batches have the fields
  // the data module declares (DataModule::batchFields) and no values: no
  // data is read; nothing is logged, checkpointed or called back.
  // fit: `steps` optimizer steps, each of accumulate_grad_batches
  // micro-batches of the training batch size, calling the hooks (each may
  // be empty) once the model is placed, once the optimizer is, and after
  // each step.
  struct DryRunHooks {
    std::function<void()> model_ready, optimizer_ready;
    std::function<void(std::int64_t step)> step_end;
  };
  void dryRunFit(LightningModule& model, data::DataModule& data, std::int64_t steps, const DryRunHooks& hooks);
  // predict: predict_step on one batch of the predict batch size.
  void dryRunPredict(LightningModule& model, data::DataModule& data);
  // What a subcommand builds before its first step: the model placed on the
  // strategy's layout and, for fit, the optimizer. Throws what a real run
  // would throw there (a layout the model cannot take, an optimizer the
  // strategy refuses).
  void rehearseSetup(LightningModule& model, data::DataModule& data, data::Stage stage);
  // Device bytes of the gradients kept between steps (see
  // Strategy::gradientDeviceBytes). REQUIRES: the model is set up.
  std::uint64_t gradientDeviceBytes() const { return strategy_->gradientDeviceBytes(*params_); }
  // Elements of each parameter bucket (what sharding strategies split
  // across ranks). REQUIRES: the model is set up.
  std::vector<std::int64_t> bucketSizes() const;

  // --- state for callbacks ---
  const TrainerOptions& options() const { return options_; }
  std::int64_t currentEpoch() const { return current_epoch_; }
  std::int64_t globalStep() const { return global_step_; }
  data::Stage stage() const { return stage_; }
  bool sanityChecking() const { return sanity_checking_; }
  bool isGlobalZero() const { return strategy_->isGlobalZero(); }
  Strategy& strategy() { return *strategy_; }
  device::Device& device() { return strategy_->device(); }
  LightningModule& model() { return *model_; }
  data::DataModule& dataModule() { return *data_; }
  optim::Optimizer* optimizer() { return optimizer_.get(); }
  optim::LRScheduler* scheduler() { return scheduler_.get(); }  // null: none
  const std::vector<std::unique_ptr<Logger>>& loggers() const { return loggers_; }
  Profiler& profiler() { return *profiler_; }
  checkpoint::CheckpointIO& checkpointIO() { return *checkpoint_io_; }
  PrecisionPlugin& precision() { return *precision_; }
  // The latest value of every logged metric (monitors read these).
  const std::map<std::string, double>& callbackMetrics() const { return callback_metrics_; }
  const std::map<std::string, double>& progressBarMetrics() const { return progress_metrics_; }
  std::int64_t numTrainingBatches() const { return num_train_batches_; }
  // The training batches the current epoch runs through: the loader's
  // (numTrainingBatches), or fewer when max_steps ends the epoch first, as
  // foreseen at its start (early stopping and max_time are not). Valid from
  // onTrainEpochStart on.
  std::int64_t epochTrainingBatches() const;
  // The current epoch's training batches run so far (a resumed epoch's
  // skipped ones included).
  std::int64_t batchesDoneInEpoch() const { return batch_in_epoch_; }
  // Samples in the training batch being run (or last run).
  std::int64_t trainBatchSize() const { return train_batch_size_; }
  std::int64_t numEvalBatches() const { return num_eval_batches_; }
  // logDir() of the first logger, else default_root_dir.
  std::string logDir() const;
  // Sends metrics to every logger (global rank 0 only), with epoch added.
  void logMetrics(std::map<std::string, double> metrics, std::int64_t step);
  // Stops fit at the end of the current step (after min_epochs/min_steps).
  void requestStop() { should_stop_ = true; }
  // Micro-batches per optimizer step from now on. REQUIRES: at an epoch's
  // start (GradientAccumulationScheduler sets it in onTrainEpochStart).
  void setAccumulateGradBatches(std::int64_t n) { options_.accumulate_grad_batches = n; }
  // A stage failed with `error`: every callback's onException runs (errors
  // they raise are logged, the stage's error is the one reported).
  void notifyException(const std::exception& error);
  bool shouldStop() const { return should_stop_; }

  // --- for callbacks that steer the weights (StochasticWeightAveraging) ---
  // Attaches `scheduler` to the optimizer in place of the current one (none:
  // null) and returns the one replaced. REQUIRES: fit's optimizer is set up.
  std::unique_ptr<optim::LRScheduler> replaceScheduler(std::unique_ptr<optim::LRScheduler> scheduler);
  // A callback wrote the model's parameter values: the strategy and the
  // optimizer take them into the copies they keep (fp32 master weights).
  void parametersReplaced();
  // Runs the model's forward in training mode without gradients over one
  // pass of the training data (limit_train_batches applies): batch-norm
  // layers update their running statistics from it. Every rank calls it.
  void forwardTrainingData();

  // --- parameter groups (BaseFinetuning's freeze / unfreeze) ---
  // Every trainable parameter starts in the optimizer's group 0.
  // Freezes `params`: no gradient is computed for them and no group steps
  // them (torch's requires_grad=False for parameters left out of the
  // optimizer). REQUIRES: fit's optimizer is set up.
  void freezeParameters(const std::vector<Tensor>& params);
  // torch's optimizer.add_param_group: `params` train from the next step in a
  // new group with `lr`, their optimizer state starting afresh. Returns the
  // group's index. REQUIRES: fit's optimizer is set up, none of `params` in
  // a group (paramGroupOf).
  std::size_t addParamGroup(const std::vector<Tensor>& params, double lr);
  // The group that steps `param`; nullopt while it is frozen.
  std::optional<std::size_t> paramGroupOf(const Tensor& param) const;

  // --- for callbacks that tune before the fit loop (LearningRateFinder) ---
  // Up to `steps` optimizer steps of training from the current state, over
  // the training data epoch after epoch, without callbacks, logging,
  // validation or scheduler: before step i the optimizer's lr is lr_at(i);
  // after it, after(i, loss) gets global rank 0's loss of the step's last
  // micro-batch (on every rank) and returns false to stop. The metrics the
  // model logged are dropped. A step that throws (out of device memory)
  // leaves nothing of itself behind (tape, lazy graph, logged metrics): the
  // error propagates and the trainer can restore a checkpoint and go on.
  // REQUIRES: in fit, before the loop.
  void runTrainingSteps(std::int64_t steps, const std::function<double(std::int64_t)>& lr_at,
                        const std::function<bool(std::int64_t, double)>& after);
  // Up to `batches` validation batches (validation_step, no gradients),
  // without callbacks or logging, as a tuner's trial runs them (Lightning's
  // limit_val_batches = steps_per_trial): what the device must hold for
  // validation at this batch size. Does nothing without a val set. A batch
  // that throws (out of device memory) leaves nothing behind and propagates.
  // REQUIRES: in fit, before the loop.
  void runValidationSteps(std::int64_t batches);
  // Restores a checkpoint this fit saved: weights, optimizer, scheduler,
  // loop counters and the callbacks' state. Every rank calls it.
  void restoreCheckpoint(const std::string& path) { restore(path, /*full=*/true); }
  // The optimizer's lr as if configured with it; a scheduler starts again
  // from it. REQUIRES: fit's optimizer is set up.
  void setLearningRate(double lr);
  // The train and val loaders made again from the data module (its batch
  // size changed), as Lightning calls train_dataloader() and
  // val_dataloader() again. REQUIRES: in fit.
  void reloadDataloaders();

  // Runs one sample through the model, outside the lazy graph and autograd,
  // so that every module's lastOutputShape() is known (the model summary's
  // out sizes). Every rank calls it (a sharded model gathers its parameters).
  void recordOutputShapes();

  // Writes a full training checkpoint (global rank 0 writes; every rank
  // takes part). `weights_only` leaves out optimizer and loop state.
  void saveCheckpoint(const std::string& path, bool weights_only = false);
  // The files saveCheckpoint(path) leaves from this rank: `path` on global
  // rank 0, and `path`.rank<R> where each rank keeps a file of its own (its
  // ZeRO optimizer shard, its tensor-parallel pieces; stages' and experts'
  // files are assembled into `path` and removed). REQUIRES: fit set up the
  // model and optimizer (dryRunFit did).
  std::vector<std::string> checkpointFiles(const std::string& path, bool weights_only = false) const;
  // Deletes a checkpoint this run wrote (with its per-rank optimizer shards).
  void removeCheckpoint(const std::string& path);

 private:
  // How saveCheckpoint splits a checkpoint into files (checkpointFiles).
  struct CheckpointLayout {
    bool split = false;        // tensor parallelism
    bool distributed = false;  // every rank writes its parameters' file
    bool assemble = false;     // ... which rank 0 assembles into the main file, then removes
    bool partial_optimizer_state = false;  // the optimizer state is sharded over ranks
    bool sharded = false;      // ... and each rank saves its shard in its own file
  };
  CheckpointLayout checkpointLayout(bool weights_only) const;
  void setupModel(LightningModule& model, data::DataModule& data, data::Stage stage);
  void fillDeferredParameters(LightningModule& model);
  void configureOptimizers();
  // Tells the optimizer which element ranges param_group_ puts in which group.
  void applyParamGroups();
  // The loader of `split`: over `dataset` if given, else the data module's.
  std::unique_ptr<data::DataLoader> makeLoader(data::DataModule& data, data::Split split,
                                               std::shared_ptr<const data::Dataset> dataset = nullptr);
  Batch toDevice(const data::HostBatch& hb);
  // A batch of `size` samples of `split`'s declared fields, without values.
  Batch dryRunBatch(data::Split split, std::int64_t size);
  bool dryRun() { return strategy_->device().shapeOnly(); }
  void restore(const std::string& ckpt_path, bool full);
  // `pieces`: ckpt holds this rank's own parts (a distributed checkpoint of
  // the same layout); else whole state.
  void restoreOptimizerState(const checkpoint::Checkpoint& ckpt, const std::string& path, bool pieces);
  std::vector<checkpoint::TensorEntry> wholeOptimizerState(std::vector<checkpoint::TensorEntry> tensors);
  void restoreParamGroups(const nlohmann::json& optimizer, const std::string& path);
  // ckpt_path as a file: "last" and "best" looked up; "" (with a warning)
  // when "last" finds none.
  std::string resolveCheckpointPath(const std::string& ckpt_path) const;
  // What a restarted fit resumes from: the newest complete checkpoint of
  // this run (rank 0's pick), else what `ckpt_path` names.
  std::string checkpointAfterRestart(const std::string& ckpt_path);
  // This run's checkpoint folders, in order: the ModelCheckpoints' dirpaths,
  // <log_dir>/checkpoints.
  std::vector<std::string> checkpointDirs() const;
  // REQUIRES: global rank 0. The newest checkpoint file (by the training
  // progress it holds) in checkpointDirs() whose optimizer shards are all
  // there, or "".
  std::string newestCompleteCheckpoint() const;
  ProfilerContext profilerContext(const char* stage);
  std::unique_ptr<data::DataLoader> setupEvaluation(LightningModule& model, data::DataModule& data,
                                                    const std::string& ckpt_path, data::Stage stage,
                                                    std::optional<data::Split> split);
  // Ends a stage: onFitEnd (fit), the precision plugin's report, the loggers' files.
  void endStage();

  void fitLoop();
  void trainEpoch();
  // The micro-batches (batch, batch_idx) of an optimizer step that wait to
  // run: with pipeline stages, a step's micro-batches run together once its
  // last has come. The loop feeding trainStep owns them, so leaving the loop
  // (an early stop, an exception) drops what waits: a later loop (a
  // BatchSizeFinder retry, another fit) never runs a stale micro-batch.
  using StepWindow = std::vector<std::pair<Batch, std::int64_t>>;
  // One micro-batch of training, every layout through one protocol: the
  // step's gradients reset at its first micro-batch, the strategy's hooks
  // around the backwards, anomaly detection, sync_batchnorm, the loss checked
  // (a scalar depending on a parameter), the optimizer step at its last.
  // Without pipeline stages the micro-batch runs now; with them it joins
  // `window` and the window runs in the strategy's schedule at the step's
  // last. Returns whether the optimizer stepped.
  bool trainStep(StepWindow& window, const Batch& batch, std::int64_t batch_idx, bool optimizer_turn);
  // trainStep's micro-batch on the whole model (no pipeline stages): forward
  // on tape_ and backward; its loss (NaN in a dry run).
  double runMicroBatch(const Batch& batch, std::int64_t batch_idx);
  // Throws UsageError naming the model's `step` method unless `loss` is
  // defined and depends on a parameter; clears `tape` first.
  void requireTrainableLoss(const Tensor& loss, const char* step, autograd::Tape& tape) const;
  class StageRun;
  // One batch forward through the pipeline stages (evaluation): the last stage's loss, on every stage.
  double forwardStages(const Batch& batch, std::int64_t batch_idx);
  // The model chunks this rank's pipeline stage holds (1 without virtual stages).
  int modelChunks() const;
  // Gradients synchronised: unscale, check, clip, step. False when the
  // precision plugin skips the step (an overflow).
  bool optimizerStep();
  // The dropout generator for `batch_idx` of the current epoch.
  void reseedDropout(std::int64_t batch_idx);
  void clipGradients(const optim::GradientView& grads);
  std::map<std::string, double> evaluationLoop(data::Split split, std::int64_t max_batches, bool sanity);
  bool timeUp() const;
  void printResults(const std::map<std::string, double>& metrics, const char* stage) const;

  template <class Hook>
  void callbacks(Hook&& hook) {
    for (auto& c : callbacks_) hook(*c);
  }

  TrainerOptions options_;
  std::unique_ptr<Strategy> strategy_;
  std::unique_ptr<PrecisionPlugin> precision_;
  std::unique_ptr<checkpoint::CheckpointIO> checkpoint_io_;
  std::unique_ptr<Profiler> profiler_;
  std::vector<std::unique_ptr<Callback>> callbacks_;
  std::vector<std::unique_ptr<Logger>> loggers_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::LRScheduler> scheduler_;
  std::uint64_t seed_;
  config::Node config_;
  int restart_round_;

  LightningModule* model_ = nullptr;
  data::DataModule* data_ = nullptr;
  // Host memory a partitioning strategy builds the model in (empty after setup).
  std::unique_ptr<device::Device> host_staging_;
  std::unique_ptr<nn::FlatParameters> params_;
  // Leaf::id() of each parameter a group steps -> its group (frozen ones are absent).
  std::unordered_map<const void*, std::size_t> param_group_;
  std::unique_ptr<MetricCollector> metrics_;
  Generator init_rng_, dropout_rng_;
  autograd::Tape tape_;
  std::unique_ptr<data::DataLoader> train_loader_, val_loader_;

  data::Stage stage_ = data::Stage::kFit;
  std::int64_t current_epoch_ = 0;
  std::int64_t global_step_ = 0;
  std::int64_t num_train_batches_ = 0;
  std::int64_t num_eval_batches_ = 0;
  std::int64_t predict_samples_ = 0;
  std::int64_t train_batch_size_ = 0;
  std::int64_t batch_in_epoch_ = 0;  // batches of current_epoch_ done (for checkpoints)
  std::int64_t skip_batches_ = 0;    // batches to skip when resuming inside an epoch
  bool epoch_completed_ = false;     // true while onTrainEpochEnd runs
  bool should_stop_ = false;
  bool sanity_checking_ = false;
  bool model_ready_ = false;
  bool overfit_warned_ = false;
  std::int64_t loaders_epoch_ = 0;  // the epoch the train/val loaders were made for
  std::chrono::steady_clock::time_point start_time_;
  std::map<std::string, double> callback_metrics_;
  std::map<std::string, double> progress_metrics_;
};

}  // namespace hpu::core
