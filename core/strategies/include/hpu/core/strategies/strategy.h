// A Strategy owns where training runs and how ranks cooperate: launching
// local workers, the process group, this process's device, the initial
// parameter broadcast, gradient synchronisation, the sampler split and the
// reduction of metrics. The Trainer calls it at fixed points of its loop.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hpu/env/environment.h"
#include "hpu/comm/collective_observer.h"
#include "hpu/comm/launcher.h"
#include "hpu/comm/process_group.h"
#include "hpu/core/data/sampler.h"
#include "hpu/core/precision/loss_scaling.h"
#include "hpu/core/strategies/pipeline_work.h"
#include "hpu/core/nn/flat_parameters.h"
#include "hpu/core/ops/parallel.h"
#include "hpu/core/optim/gradient_view.h"
#include "hpu/core/optim/lr_scheduler.h"
#include "hpu/core/optim/optimizer.h"
#include "hpu/device/platform.h"

namespace hpu::core {

// The Trainer settings a strategy's own rules may set (DeepSpeed's batch
// rule and gradient clipping).
struct TrainingSettings {
  std::int64_t accumulate_grad_batches = 1;
  std::optional<double> gradient_clip_val;
};

// What a strategy needs to know about the process and the job.
struct RunEnvironment {
  Environment env;
  std::vector<std::string> argv;  // to spawn local workers
  int devices_per_node = 1;
  int num_nodes = 1;
  // trainer.devices given as a list: local rank r uses visible device
  // device_indices[r]; empty: local rank r uses device r.
  std::vector<int> device_indices;
  std::string version;  // the program version, compared at rendezvous
  // The resolved config as (key path, value), compared at rendezvous.
  std::vector<std::pair<std::string, std::string>> config_entries;
  // `hpu-train estimate`: this process traces global rank simulated_rank of
  // the job (devices_per_node x num_nodes ranks) alone: no workers, no
  // rendezvous, collectives that move no data. -1: a real run.
  int simulated_rank = -1;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;

  // Brings up the job (workers, rendezvous) and chooses this process's
  // device on `platform`.
  virtual void setup(const RunEnvironment& run, device::Platform& platform) = 0;
  virtual device::Device& device() = 0;

  virtual int worldSize() const { return 1; }
  virtual int globalRank() const { return 0; }
  virtual int localRank() const { return 0; }
  virtual int localWorldSize() const { return 1; }
  bool isGlobalZero() const { return globalRank() == 0; }
  // This rank among the replicas that read different data. Dropout streams
  // are per replica: the tensor-parallel ranks of one draw alike, so their
  // replicated activations stay equal.
  virtual int dataParallelRank() const { return globalRank(); }

  // The group a model splits its layers across (tensor parallelism), or
  // null. Valid from setup() on.
  virtual ops::ParallelGroup* tensorParallelGroup() { return nullptr; }
  // nn::InitContext::vocab_divisible_by: what this strategy's tensor
  // parallelism pads a vocabulary to, when the model's config says nothing.
  virtual std::optional<std::int64_t> vocabDivisibleBy() const { return std::nullopt; }
  // The group a mixture of experts splits its experts across (expert
  // parallelism: each rank holds experts / size of every MoE layer and
  // exchanges tokens with the others), or null. Valid from setup() on.
  virtual ops::ParallelGroup* expertParallelGroup() { return nullptr; }
  // Whether the model also splits its activations along the sequence
  // between the tensor-parallel regions (Megatron-LM's sequence parallelism).
  virtual bool sequenceParallel() const { return false; }
  // Pipeline parallelism: the stages the model is split into (1: none),
  // this rank's, and the decoder layers of each when configured (empty:
  // the model balances them).
  virtual int pipelineStages() const { return 1; }
  virtual int pipelineStage() const { return 0; }
  virtual std::vector<int> pipelineLayers() const { return {}; }
  // The model chunks each stage holds (interleaved 1F1B), as configured.
  virtual nn::VirtualStages pipelineVirtualStages() const { return {}; }
  // Runs `micro_batches` micro-batches through the stages: with `backward`,
  // an optimizer step's, in the 1F1B schedule, interleaved over the work's
  // model chunks (strategies/pipeline_order.h); without,
  // forwards only (evaluation). Returns each micro-batch's loss as the last
  // stage computed it (0 where it has no values), on every stage.
  // REQUIRES: pipelineStages() > 1.
  virtual std::vector<double> runPipeline(PipelineWork& work, std::size_t micro_batches, bool backward);

  // The whole parameter's values assembled from every tensor-parallel rank's
  // piece (`piece`: this rank's, of a parameter split as `shard`, shaped
  // `local`). Every rank of the group calls it for the same parameters in
  // the same order. Default: the piece itself (nothing is split), without
  // a padded vocabulary's rows.
  virtual std::vector<float> wholeOf(std::span<const float> piece, const Shard& shard, const Shape& local) {
    return shard.whole(local, piece);
  }
  // Whether a checkpoint is each rank's own part in a file of its own
  // (ModelParallelStrategy's save_distributed_checkpoint; HPUDeepSpeedStrategy
  // with experts split across ranks) rather than the whole model in one file.
  virtual bool savesDistributedCheckpoint() const { return false; }

  // Bucket size for FlatParameters.
  virtual std::int64_t bucketCapBytes() const { return 25ll << 20; }
  // False when gradient buckets live only during backward (ZeRO-2/3 keep
  // gradient shards).
  virtual bool persistentGradients() const { return true; }
  // The dtype of gradient buckets when it is not their parameters' own
  // (DeepSpeed's bf16 optimizer accumulates a bf16 model's gradients in fp32).
  virtual std::optional<DType> gradientDtype() const { return std::nullopt; }
  // Under a half precision (bf16-mixed, bf16-true, fp8: bf16; 16-mixed:
  // fp16) the model is held in the half type and the optimizer steps fp32
  // master weights kept in its state (DeepSpeed's bf16 and fp16 modes,
  // Megatron-LM's distributed optimizer); else the precision plugin's
  // weights, fp32 under autocast (Lightning's).
  virtual bool holdsHalfModel() const { return false; }
  // Device bytes of the gradient storage this rank keeps between steps:
  // whole buckets, or ZeRO's shards (none in host memory).
  virtual std::uint64_t gradientDeviceBytes(const nn::FlatParameters& params) const;
  // Whether parameters reach the device as shards only (ZeRO-3): the model
  // is then built in host memory and setupParameters releases every bucket,
  // as DeepSpeed partitions a model at initialisation; no device ever holds
  // it whole.
  virtual bool partitionsParameters() const { return false; }
  // Whether the optimizer state lives in host memory (ZeRO-Offload).
  virtual bool offloadOptimizerState() const { return false; }
  // Whether activation checkpoints keep their inputs in host memory.
  virtual bool activationCheckpointsOnHost() const { return false; }
  // The module classes (Module::typeName) whose forward the Trainer has
  // recomputed in backward instead of kept (FSDP's
  // activation_checkpointing_policy); empty: none.
  virtual std::vector<std::string> recomputedLayerClasses() const { return {}; }
  // The run's precision (trainer.precision's name), once chosen and before
  // setupParameters: FSDP reduces gradients in its reduce dtype.
  virtual void usePrecision(const std::string& precision) {}
  // Parameter values for a step or an evaluation (kStep: what the forward
  // hooks do not gather themselves) or for a checkpoint (kAll), and their
  // release after. ZeRO-3 gathers its shards; other strategies hold all.
  enum class GatherScope { kStep, kAll };
  virtual void gatherParameters(nn::FlatParameters&, GatherScope) {}
  virtual void releaseParameters(nn::FlatParameters&, GatherScope) {}
  // After full parameter values were loaded (checkpoint restore): sharding
  // strategies take their shards from them.
  virtual void parametersLoaded(nn::FlatParameters&) {}
  // The batch and accumulation rules of the strategy (DeepSpeed's): may
  // change accumulate_grad_batches and clipping; throws ConfigError.
  virtual void configureTraining(TrainingSettings&, std::int64_t dataloader_batch) {}
  // What the strategy's own config asks for (a DeepSpeed config's bf16/fp16,
  // optimizer and scheduler), used when nothing else chose: "" / nullptr.
  virtual std::string configuredPrecision() const { return ""; }
  virtual LossScalerOptions configuredLossScaler() const { return {}; }
  virtual std::unique_ptr<optim::Optimizer> configuredOptimizer() const { return nullptr; }
  virtual std::unique_ptr<optim::LRScheduler> configuredScheduler() const { return nullptr; }
  // Refuses optimizers the strategy cannot shard (DeepSpeed's rule).
  virtual void checkOptimizer(const optim::Optimizer&) const {}
  // Called once the parameters are flat: DDP broadcasts rank 0's values
  // (and `buffers`: batch-norm statistics, parameters frozen before the
  // buckets were made).
  virtual void setupParameters(nn::Module& model, nn::FlatParameters& params,
                               const std::vector<nn::NamedTensor>& buffers) {}
  // The slices this rank's optimizer updates (all buckets unless sharded).
  virtual std::vector<optim::ParamSlice> optimizerSlices(nn::FlatParameters& params);
  // Where each optimizer slice sits in its bucket: [offset, offset + size)
  // of `total` elements (the whole bucket unless the state is sharded).
  struct SliceShard {
    std::int64_t offset, size, total;
    std::size_t bucket = 0;  // the bucket's index
  };
  virtual std::vector<SliceShard> optimizerShards(nn::FlatParameters& params);
  // Whether checkpoints hold the optimizer shards whole (wholeOptimizerSlice
  // gathers them) rather than each rank's in a file of its own.
  virtual bool gathersOptimizerSlices() const { return false; }
  // For a strategy that saves its optimizer shards whole (ModelParallelStrategy's
  // ZeRO-1): slice `where`'s state gathered from every rank's `shard` of it
  // (a collective of every rank). nullopt (exactly when gathersOptimizerSlices
  // is false): each rank saves its own shard.
  virtual std::optional<std::vector<float>> wholeOptimizerSlice(std::span<const float> shard, const SliceShard& where) {
    return std::nullopt;
  }
  // Where a backward sits in gradient accumulation.
  struct MicroBatch {
    bool first = true;  // the first of an optimizer step: gradients start from zero
    bool last = true;   // the last: an optimizer step follows
  };
  // Around every backward: gradient synchronisation. DDP all-reduces buckets
  // as they complete on an optimizer step's last micro-batch and waits for
  // them in afterBackward; ZeRO-2/3 reduce-scatter on every micro-batch and
  // accumulate in their gradient shards, as DeepSpeed does.
  virtual void beforeBackward(nn::FlatParameters&, MicroBatch) {}
  // After every backward. On the last micro-batch, parameters that got no
  // gradient get zeros, then gradients are synchronised.
  virtual void afterBackward(nn::FlatParameters& params, MicroBatch m) {
    if (m.last) params.zeroMissingGrads();
  }
  // The gradients this rank's optimizer steps with (all buckets, or this
  // rank's shards), for clipping and loss-scale checks.
  virtual optim::GradientView gradients(nn::FlatParameters& params);
  // After optimizer.step(): sharded strategies gather updated parameters.
  virtual void afterOptimizerStep(nn::FlatParameters&) {}

  // The distributed part of a data loader's sampler.
  virtual data::SamplerOptions samplerFor(data::SamplerOptions base) const { return base; }
  // Sums `values` across ranks in place / takes their elementwise max.
  virtual void allReduceSum(std::span<double> values) {}
  virtual void allReduceMax(std::span<double> values) {}
  virtual void barrier(const std::string& name) {}
  // Rank `root`'s text on every rank.
  virtual std::string broadcast(const std::string& text, int root) { return text; }
  // Every rank's text, in rank order, on every rank.
  virtual std::vector<std::string> gatherText(const std::string& text) { return {text}; }

  // Ends the job: waits for (or stops) local workers. Returns the exit code
  // of the job as seen from this process (0 if all went well).
  virtual int teardown(bool failed) { return failed ? 1 : 0; }
  // After teardown: how the local ranks this process started ended, with
  // the errors they reported (empty when it started none), for the job's
  // failure report.
  virtual std::vector<comm::WorkerExit> workerExits() const { return {}; }

  // Tells `observer` (null: nobody) of every collective this strategy's
  // process group runs (profilers' collectives track).
  virtual void observeCollectives(std::shared_ptr<comm::CollectiveObserver> observer) {}

  // On shape-only devices (a dry run): checks that the ranks of every
  // process group issued the same collectives since the last check
  // (comm::ProcessGroup::checkSchedules); throws CollectiveMismatchError
  // naming the rank, the group and the first collective that differs. A
  // single process has nothing to compare.
  virtual comm::ScheduleCheck checkCollectiveSchedules() { return {}; }

  // Small texts (a rank's report) through the job's store: rank 0's control
  // plane, not the data plane. Every rank posts its own under `topic`; a
  // rank reads the ranks' it needs, waiting for each (at most the collective
  // timeout), so what it receives grows with what it reads, not with the
  // world. REQUIRES (readText): `rank` posts under `topic`.
  virtual void postText(const std::string& topic, const std::string& text) { posted_[topic] = text; }
  virtual std::string readText(const std::string& topic, int rank) { return posted_.at(topic); }

 private:
  std::map<std::string, std::string> posted_;  // a single process's postText
};

// Full parameter values for the lifetime of the scope (ZeRO-3 gathers its
// shards at the start and releases the full values at the end).
class GatheredParameters {
 public:
  GatheredParameters(Strategy& strategy, nn::FlatParameters& params, Strategy::GatherScope scope)
      : strategy_(strategy), params_(params), scope_(scope) {
    strategy_.gatherParameters(params_, scope_);
  }
  ~GatheredParameters() { strategy_.releaseParameters(params_, scope_); }
  GatheredParameters(const GatheredParameters&) = delete;
  GatheredParameters& operator=(const GatheredParameters&) = delete;

 private:
  Strategy& strategy_;
  nn::FlatParameters& params_;
  Strategy::GatherScope scope_;
};

// The visible device local rank `local_rank` trains on (checked to exist).
device::Device& deviceFor(device::Platform& platform, const RunEnvironment& run, int local_rank);

// One process, one device (hpu_single).
std::unique_ptr<Strategy> makeSingleDeviceStrategy(int device_index);
// DeepSpeed-inference's tensor parallelism (its config's tensor_parallel):
// ModelParallelStrategy's split inside data parallelism, a size unset being
// "auto", with no vocabulary padding unless the model asks (DeepSpeed's
// AutoTP pads none).
std::unique_ptr<Strategy> makeDeepSpeedInferenceStrategy(std::optional<int> data_parallel_size,
                                                         std::optional<int> tensor_parallel_size);
// A process group as the group a model's layers are split across (the
// tensor-parallel group of ModelParallelStrategy).
std::unique_ptr<ops::ParallelGroup> makeTensorParallelGroup(std::unique_ptr<comm::ProcessGroup> group);
// Data parallel over processes and nodes (hpu_parallel). An empty
// `cluster_environment` detects it from the environment variables.
std::unique_ptr<Strategy> makeParallelStrategy(std::int64_t bucket_cap_bytes, const std::string& cluster_environment);

}  // namespace hpu::core
