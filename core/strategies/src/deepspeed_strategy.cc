// HPUDeepSpeedStrategy: ZeRO data parallelism on the flat parameter buckets.
//   stage 0  every rank holds everything; gradients all-reduced (as DDP)
//   stage 1  optimizer state sharded: each rank updates its shard of every
//            bucket, then the updated shards are all-gathered
//   stage 2  gradients sharded too: each bucket is reduce-scattered as soon
//            as backward completes it, and its full gradient buffer freed
//   stage 3  parameters sharded too: full values exist only while a step,
//            an evaluation or a checkpoint needs them
// offload_optimizer keeps optimizer state and gradient shards in host
// memory (the optimizer step runs on the host); offload_parameters keeps
// stage 3's parameter shards there. Shards are the balanced partition of
// comm::ProcessGroup::shardRange, so every rank knows every rank's part.
//
// A half-precision model (DeepSpeed's bf16 and fp16 modes: the DeepSpeed
// precision plugin builds the model in bf16 or fp16) is stepped through fp32
// master weights in the optimizer's state, as DeepSpeed's ZeRO and bf16
// optimizers keep them: the parameters, their shards and ZeRO-2/3's gradient
// shards are in the model's dtype; stages 0 and 1 accumulate gradients in
// fp32. Parameters travel in the model's dtype; gradients in
// communication_data_type, which defaults to the model's dtype (bf16 on the
// wire; fp16 travels as fp32).
//
// Expert parallelism (expert_parallel_size ep > 1, DeepSpeed-MoE's ep_size,
// its "E + D + Z" layouts; expert_parallel.h): ep consecutive ranks split
// every MoE layer's experts between them. A bucket of experts is averaged,
// scaled by 1 / ep, over the ranks holding the same experts, and under
// ZeRO-1/2 its shards (state, gradients) are taken over those ranks only;
// the rest of the model is sharded over every rank as without experts.
// Checkpoints are written by every rank (its experts in its own file, the
// optimizer state whole), as ModelParallelStrategy's expert-parallel ones.
// ZeRO-3 is refused, as DeepSpeed does.
//
// HPUFSDPStrategy runs on this class too (fsdp_settings.h): its stage from
// FSDP's sharding strategy, no DeepSpeed config (no batch rule, any
// optimizer), the trainer's weights (not a half model: Lightning's
// FSDPPrecision keeps fp32 parameters under mixed precision) with gradients
// reduced in the precision's reduce dtype, HYBRID_SHARD's shards within
// groups of ranks replicated across the others, checkpoints with the whole
// optimizer state (state_dict_type full), and the wrap policy's units.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <map>
#include <optional>

#include "bf16_wire.h"
#include "distributed_strategy.h"
#include "expert_parallel.h"
#include "fsdp_settings.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/strategies/deepspeed_config.h"
#include "hpu/core/tensor/autograd.h"
#include "hpu/device/numerics.h"
#include "trainer_part_param.h"

namespace hpu::core {
namespace {

// init_args.cluster_environment ("" when absent or null: detected).
std::string clusterEnvironmentOf(const config::Node& init_args) {
  const config::Node* n = init_args.find("cluster_environment");
  return n != nullptr && !n->isNull() ? n->str() : "";
}

class DeepSpeedStrategy final : public DistributedStrategy {
 public:
  DeepSpeedStrategy(config::Node init_args, Environment env)
      : DistributedStrategy(clusterEnvironmentOf(init_args)), init_args_(std::move(init_args)), env_(std::move(env)) {
    // Settings that do not depend on the data are known at once.
    settings_.stage = config::asBool(*init_args_.find("zero_optimization")) ? static_cast<int>(config::asInt(*init_args_.find("stage"))) : 0;
    if (const config::Node* ep = init_args_.find("expert_parallel_size"); ep != nullptr && !ep->isNull())
      ep_ = static_cast<int>(config::asInt(*ep));
  }
  DeepSpeedStrategy(config::Node init_args, FsdpSettings fsdp)
      : DistributedStrategy(clusterEnvironmentOf(init_args)), init_args_(std::move(init_args)), fsdp_(std::move(fsdp)) {
    settings_.stage = fsdp_->stage;
  }

  std::string name() const override { return fsdp_ ? "HPUFSDPStrategy" : "HPUDeepSpeedStrategy"; }

  void setup(const RunEnvironment& run, device::Platform& platform) override {
    env_ = run.env;
    if (const config::Node* pd = init_args_.find("parallel_devices");
        pd != nullptr && pd->isSequence() && static_cast<int>(pd->items().size()) != run.devices_per_node)
      throw ConfigError(fmt::format("trainer.strategy.init_args.parallel_devices lists {} devices but trainer.devices is {}",
                                    pd->items().size(), run.devices_per_node));
    const int world = run.devices_per_node * run.num_nodes;
    const int shard_size = !fsdp_ ? 0 : fsdp_->shard_group_size < 0 ? run.devices_per_node : fsdp_->shard_group_size;
    if (shard_size > 0 && world % shard_size != 0)
      throw UsageError(fmt::format("trainer.strategy.init_args.device_mesh: shard groups of {} ranks do not divide the "
                                   "world size {} (trainer.devices {} x trainer.num_nodes {}); give [replicas, shard "
                                   "size] multiplying to it",
                                   shard_size, world, run.devices_per_node, run.num_nodes));
    if (shard_size > 0 && fsdp_->replica_count > 0 && fsdp_->replica_count * shard_size != world)
      throw UsageError(fmt::format("trainer.strategy.init_args.device_mesh: [{}, {}] ({} replicas of shard groups of {} "
                                   "ranks) does not multiply to the world size {} (trainer.devices {} x "
                                   "trainer.num_nodes {})",
                                   fsdp_->replica_count, shard_size, fsdp_->replica_count, shard_size, world,
                                   run.devices_per_node, run.num_nodes));
    if (ep_ > 1 && world % ep_ != 0)
      refuseExpertParallelSize(ep_, fmt::format("the experts split across data-parallel ranks, and {} does not divide "
                                                "the world size {} (trainer.devices {} x trainer.num_nodes {})",
                                                ep_, world, run.devices_per_node, run.num_nodes));
    DistributedStrategy::setup(run, platform);
    if (ep_ > 1) experts_ = splitExpertGroups(group(), globalRank(), worldSize(), /*model=*/1, ep_);
    if (shard_size > 0 && shard_size < world) {
      // Rank r shards with the ranks of its row r / size and is a replica of
      // those of its column r % size (FSDP's device mesh [replicas, shard]).
      const int r = globalRank();
      std::vector<int> row, column;
      for (int k = 0; k < shard_size; ++k) row.push_back(r / shard_size * shard_size + k);
      for (int k = 0; k < world / shard_size; ++k) column.push_back(k * shard_size + r % shard_size);
      shard_group_ = group().split(row);
      replicas_ = group().split(column);
    }
  }

  ops::ParallelGroup* expertParallelGroup() override { return experts_.experts.get(); }
  // Expert-parallel ranks hold other experts each: every rank's file stays.
  bool savesDistributedCheckpoint() const override { return ep_ > 1; }

  void observeCollectives(std::shared_ptr<comm::CollectiveObserver> observer) override {
    DistributedStrategy::observeCollectives(observer);
    experts_.observe(observer);
    if (shard_group_) shard_group_->setObserver(observer);
    if (replicas_) replicas_->setObserver(observer);
  }
  int teardown(bool failed) override {
    experts_.reset();  // before the group they were split from
    shard_group_.reset();
    replicas_.reset();
    return DistributedStrategy::teardown(failed);
  }

  std::string configuredPrecision() const override { return settings_.precision; }
  LossScalerOptions configuredLossScaler() const override { return settings_.loss_scaler; }

  std::unique_ptr<optim::Optimizer> configuredOptimizer() const override {
    const auto& p = settings_.optimizer_params;
    auto param = [&](const char* k, double d) { return p.count(k) ? p.at(k) : d; };
    if (settings_.optimizer_type == "SGD") {
      optim::SGDOptions o;
      o.lr = param("lr", o.lr);
      o.momentum = param("momentum", 0.0);
      o.weight_decay = param("weight_decay", 0.0);
      return optim::makeSGD(o);
    }
    if (settings_.optimizer_type == "Adam" || settings_.optimizer_type == "AdamW") {
      optim::AdamOptions o;
      o.lr = param("lr", o.lr);
      o.beta1 = param("beta1", o.beta1);
      o.beta2 = param("beta2", o.beta2);
      o.eps = param("eps", o.eps);
      o.weight_decay = param("weight_decay", settings_.optimizer_type == "AdamW" ? 0.01 : 0.0);
      return settings_.optimizer_type == "AdamW" ? optim::makeAdamW(o) : optim::makeAdam(o);
    }
    return nullptr;
  }

  std::unique_ptr<optim::LRScheduler> configuredScheduler() const override {
    return settings_.scheduler ? optim::makeWarmupDecayLR(*settings_.scheduler) : nullptr;
  }

  // DeepSpeed shards only the optimizers it was tested with unless told to.
  void checkOptimizer(const optim::Optimizer& o) const override {
    if (fsdp_ || settings_.stage == 0 || settings_.allow_untested_optimizer) return;
    if (o.name() == "Adam" || o.name() == "AdamW") return;
    throw UsageError(fmt::format("You are using an untested ZeRO Optimizer ({}). Please add "
                                 "<\"zero_allow_untested_optimizer\": true> in the configuration file to use it.",
                                 o.name()));
  }

  void configureTraining(TrainingSettings& o, std::int64_t dataloader_batch) override {
    if (fsdp_) return configureFsdp();
    settings_ = resolveDeepSpeed(init_args_, env_, dataloader_batch, o.accumulate_grad_batches, worldSize());
    // The DeepSpeed config's accumulation (given, or derived from
    // train_batch_size) must agree with a trainer.accumulate_grad_batches
    // other than 1, as Lightning requires.
    if (o.accumulate_grad_batches != 1 && o.accumulate_grad_batches != settings_.gradient_accumulation_steps)
      throw UsageError(fmt::format("trainer.accumulate_grad_batches={} but the DeepSpeed config accumulates {} "
                                   "(gradient_accumulation_steps, or train_batch_size / (micro x world)); set one of them",
                                   o.accumulate_grad_batches, settings_.gradient_accumulation_steps));
    o.accumulate_grad_batches = settings_.gradient_accumulation_steps;
    if (ep_ > 1 && settings_.stage == 3)
      refuseExpertParallelSize(
          ep_, fmt::format("ZeRO stage 3 cannot hold experts split across ranks (DeepSpeed: \"MoE not supported with "
                           "Stage 3\": stage 3 partitions every parameter over all ranks); use stage 1 or 2 with "
                           "expert_parallel_size {}, or stage 3 with expert_parallel_size 1, where each rank gathers a "
                           "MoE layer's experts whole with the layer (transformers' set_z3_leaf_modules)",
                           ep_));
    if (settings_.gradient_clipping && !o.gradient_clip_val) o.gradient_clip_val = settings_.gradient_clipping;
    if (isGlobalZero())
      spdlog::info("{}: ZeRO stage {}{}{}{}; train_batch_size {} = micro {} x accumulation {} x world {}", name(),
                   settings_.stage, settings_.offload_optimizer ? ", optimizer offloaded" : "",
                   settings_.offload_parameters ? ", parameters offloaded" : "",
                   ep_ > 1 ? fmt::format(", experts split across {} ranks", ep_) : "", settings_.train_batch_size,
                   settings_.micro_batch_size, settings_.gradient_accumulation_steps, worldSize());
  }
  const DeepSpeedSettings& settings() const { return settings_; }

  // ZeRO-3 gathers the buckets of a module around its forward and backward,
  // so its buckets hold one parameter each: a bucket shared by several
  // modules would be gathered whole, again for each of them.
  std::int64_t bucketCapBytes() const override {
    if (settings_.stage == 3) return 1;
    return settings_.reduce_bucket_elements > 0 ? settings_.reduce_bucket_elements * 4 : Strategy::bucketCapBytes();
  }
  bool persistentGradients() const override { return settings_.stage < 2; }
  std::optional<DType> gradientDtype() const override {
    if (settings_.stage < 2 && !fsdp_) return DType::kFloat32;
    return std::nullopt;
  }
  bool partitionsParameters() const override { return settings_.stage == 3; }
  bool holdsHalfModel() const override { return !fsdp_; }
  void usePrecision(const std::string& precision) override { precision_ = precision; }
  std::vector<std::string> recomputedLayerClasses() const override {
    return fsdp_ ? fsdp_->recompute_classes : std::vector<std::string>{};
  }
  std::uint64_t gradientDeviceBytes(const nn::FlatParameters& params) const override {
    if (settings_.stage < 2) return Strategy::gradientDeviceBytes(params);
    if (settings_.offload_optimizer) return 0;
    std::uint64_t bytes = 0;
    for (const optim::StateBuffer& s : grad_shards_) bytes += s.size() * device::logicalSize(s.dtype());
    return bytes;
  }
  bool offloadOptimizerState() const override { return settings_.offload_optimizer; }
  bool activationCheckpointsOnHost() const override { return settings_.cpu_checkpointing; }

  void setupParameters(nn::Module& model, nn::FlatParameters& params,
                       const std::vector<nn::NamedTensor>& buffers) override {
    const std::size_t n = params.buckets().size();
    expert_buckets_ = expertBuckets(params, buffers, ep_);
    // Experts from the first of the ranks holding the same ones, the rest from rank 0.
    std::vector<comm::ProcessGroup*> sources;
    for (const bool expert : expert_buckets_) sources.push_back(expert ? experts_.same_experts.get() : nullptr);
    broadcastParameters(params, buffers, nullptr, sources, experts_.same_experts.get());
    if (ep_ > 1) model.setForwardHooks(std::make_shared<ExpertGradientCompletion>(params));
    shards_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const nn::ParamBucket& b = params.buckets()[i];
      if (settings_.stage == 0) {
        shards_[i] = {0, b.numel};
        continue;
      }
      comm::ProcessGroup& holders = holdersOf(i);
      const auto r = comm::ProcessGroup::shardRange(static_cast<std::size_t>(b.numel), holders.size(), holders.rank());
      shards_[i] = {static_cast<std::int64_t>(r.offset), static_cast<std::int64_t>(r.size)};
    }
    const DType model_dtype = n == 0 ? DType::kFloat32 : params.buckets().front().dtype;
    half_model_ = !fsdp_ && model_dtype != DType::kFloat32;
    bf16_grad_wire_ = settings_.communication_data_type.empty() ? model_dtype == DType::kBFloat16
                                                                : settings_.communication_data_type == "bf16";
    // FSDPPrecision's reduce dtype: bf16 under bf16-mixed too (fp32 parameters).
    if (fsdp_) bf16_grad_wire_ = precision_ == "bf16-mixed" || precision_ == "bf16-true" || precision_ == "fp8";
    pending_.assign(n, comm::Work());
    wire_.assign(n, {});
    reduced_.assign(n, false);
    if (settings_.stage >= 2) grad_shards_ = makeShards(params, settings_.offload_optimizer);
    if (settings_.stage == 3) {
      value_shards_ = makeShards(params, settings_.offload_parameters);
      parametersLoaded(params);
      for (std::size_t i = 0; i < n; ++i) params.releaseValues(i);
      refs_.assign(n, 0);
      params_ = &params;
      // Parameters registered on the model itself have no module forward to
      // gather them: their buckets stay gathered for a whole step (with a
      // wrap policy, those of every module outside the policy's units: the
      // root unit's).
      if (fsdp_ && !fsdp_->wrap_classes.empty()) {
        units_ = std::make_unique<WrapUnits>(model, fsdp_->wrap_classes);
        for (const Tensor& t : units_->rootParameters())
          if (params.bucketed(t)) addBucket(step_buckets_, params.bucketOf(t));
      } else {
        for (const auto& p : model.ownParameters())
          if (params.bucketed(p.tensor)) step_buckets_.push_back(params.bucketOf(p.tensor));
      }
      model.setForwardHooks(std::make_shared<ModuleGather>(*this));
    }
  }

  std::vector<optim::ParamSlice> optimizerSlices(nn::FlatParameters& params) override {
    std::vector<optim::ParamSlice> slices;
    for (std::size_t i = 0; i < params.buckets().size(); ++i) {
      auto& b = params.buckets()[i];
      const Shard& s = shards_[i];
      float* values = settings_.stage == 3 ? value_shards_[i].data() : b.valueSpan().data() + s.offset;
      const float* grads = settings_.stage >= 2 ? grad_shards_[i].data() : b.gradSpan().data() + s.offset;
      slices.push_back({values, grads, s.size, b.dtype, /*master=*/half_model_});
    }
    return slices;
  }

  std::vector<SliceShard> optimizerShards(nn::FlatParameters& params) override {
    std::vector<SliceShard> out;
    for (std::size_t i = 0; i < shards_.size(); ++i)
      out.push_back({shards_[i].offset, shards_[i].size, params.buckets()[i].numel, i});
    return out;
  }
  // Expert-parallel checkpoints hold each rank's optimizer state whole (its
  // ZeRO shards gathered over the ranks holding the bucket), so that they
  // assemble as ModelParallelStrategy's do.
  // So do FSDP's full state dicts, rank 0 writing them in its one file.
  bool gathersOptimizerSlices() const override {
    return settings_.stage != 0 && (ep_ > 1 || (fsdp_ && fsdp_->whole_optimizer_state));
  }
  std::optional<std::vector<float>> wholeOptimizerSlice(std::span<const float> shard, const SliceShard& where) override {
    if (!gathersOptimizerSlices()) return std::nullopt;
    std::vector<float> whole(static_cast<std::size_t>(where.total));
    holdersOf(where.bucket).allgather(comm::ConstBufferView(shard), comm::BufferView(std::span<float>(whole)));
    return whole;
  }

  void beforeBackward(nn::FlatParameters& params, MicroBatch m) override {
    std::fill(reduced_.begin(), reduced_.end(), false);
    first_micro_batch_ = m.first;
    if (!reducesNow(m)) {
      params.setBucketReadyCallback(nullptr);
      return;
    }
    params.setBucketReadyCallback([this, &params](std::size_t i) { reduce(params, i); });
  }

  void afterBackward(nn::FlatParameters& params, MicroBatch m) override {
    if (!reducesNow(m)) return;
    for (std::size_t i = 0; i < params.buckets().size(); ++i) {
      if (reduced_[i]) continue;
      if (!params.gradsAllocated(i)) params.zeroMissingGrads();
      params.zeroMissingGrads();
      reduce(params, i);
    }
    for (auto& w : pending_) w.wait(comm::Work::Clock::time_point::max());
    if (bf16_grad_wire_ && settings_.stage < 2)
      for (std::size_t i = 0; i < params.buckets().size(); ++i) wire::fromBits(wire_[i], params.buckets()[i].gradSpan());
    params.setBucketReadyCallback(nullptr);
  }

  optim::GradientView gradients(nn::FlatParameters& params) override {
    if (settings_.stage == 0 && ep_ == 1) return Strategy::gradients(params);
    optim::GradientView v;
    for (std::size_t i = 0; i < params.buckets().size(); ++i) {
      float* g = settings_.stage >= 2 ? grad_shards_[i].data() : params.buckets()[i].gradSpan().data() + shards_[i].offset;
      v.spans.emplace_back(g, static_cast<std::size_t>(shards_[i].size));
      // A shard holds its elements on one of the bucket's holders (and its
      // replicas under HYBRID_SHARD); stage 0's whole buckets count 1 /
      // holders on each: the total counts every element once.
      v.weights.push_back(settings_.stage == 0 ? 1.0 / holdersOf(i).size() : 1.0 / replicasOf(i));
    }
    v.total = [this](double x) {
      double values[1] = {x};
      allReduceSum(values);
      return values[0];
    };
    return v;
  }

  void afterOptimizerStep(nn::FlatParameters& params) override {
    if (settings_.stage == 0 || settings_.stage == 3) return;
    // Every rank updated its shard: gather them so every rank has all values.
    for (std::size_t i = 0; i < params.buckets().size(); ++i) {
      nn::ParamBucket& b = params.buckets()[i];
      auto values = b.valueSpan();
      const auto shard = static_cast<std::size_t>(shards_[i].size);
      // The input is a copy: allgather's output overlaps it (a dry run's holds no values).
      std::vector<float> mine(values.data() ? shard : 0);
      if (values.data()) std::copy_n(values.begin() + shards_[i].offset, shard, mine.begin());
      wire::allgatherValues(holdersOf(i), std::span<const float>(values.data() ? mine.data() : nullptr, shard), values,
                            b.dtype);
    }
  }

  void gatherParameters(nn::FlatParameters& params, GatherScope scope) override {
    if (settings_.stage != 3) return;
    if (scope == GatherScope::kAll)
      for (std::size_t i = 0; i < params.buckets().size(); ++i) acquire(i);
    else
      for (std::size_t i : step_buckets_) acquire(i);
  }

  void releaseParameters(nn::FlatParameters& params, GatherScope scope) override {
    if (settings_.stage != 3) return;
    if (scope == GatherScope::kAll)
      for (std::size_t i = 0; i < params.buckets().size(); ++i) release(i);
    else
      for (std::size_t i : step_buckets_) release(i);
  }

  void parametersLoaded(nn::FlatParameters& params) override {
    if (settings_.stage != 3 || device().shapeOnly()) return;
    for (std::size_t i = 0; i < params.buckets().size(); ++i) {
      auto values = params.buckets()[i].valueSpan();
      std::copy(values.begin() + shards_[i].offset, values.begin() + shards_[i].offset + shards_[i].size,
                value_shards_[i].data());
    }
  }

 private:
  struct Shard {
    std::int64_t offset = 0, size = 0;
  };

  // ZeRO-3's parameter lifecycle per module: a module's buckets are gathered
  // before its forward and released after it; on the tape, a gather is
  // recorded after the forward (so backward gathers again before the
  // module's gradients) and a release before it (so backward releases after).
  class ModuleGather final : public nn::ForwardHooks {
   public:
    explicit ModuleGather(DeepSpeedStrategy& s) : s_(s) {}
    void before(nn::Module& m) override {
      const auto buckets = s_.bucketsOf(m);
      for (std::size_t b : buckets) s_.acquire(b);
      // A leaf's backward is over here: parameters of children this rank did
      // not call count as ready now, on every rank at the same point.
      if (auto* tape = autograd::currentTape(); tape != nullptr && !buckets.empty())
        tape->record([&s = s_, &m, buckets, leaf = m.zero3Leaf()] {
          if (leaf) s.params_->completeGrads(m);
          for (std::size_t b : buckets) s.release(b);
        });
    }
    void after(nn::Module& m) override {
      const auto buckets = s_.bucketsOf(m);
      if (auto* tape = autograd::currentTape(); tape != nullptr && !buckets.empty())
        tape->record([&s = s_, buckets] {
          for (std::size_t b : buckets) s.acquire(b);
        });
      for (std::size_t b : buckets) s_.release(b);
    }

   private:
    DeepSpeedStrategy& s_;
  };

  // The buckets of the parameters m's forward reads: its own and those it
  // uses (a ZeRO-3 leaf's: its descendants' too).
  // Under a wrap policy: a unit's parameters (none for other modules).
  std::vector<std::size_t> bucketsOf(const nn::Module& m) const {
    std::vector<std::size_t> out;
    const auto add = [&](const Tensor& t) {
      if (params_->bucketed(t)) addBucket(out, params_->bucketOf(t));  // frozen: whole on every rank
    };
    if (units_) {
      for (const Tensor& t : units_->parametersOf(m)) add(t);
      return out;
    }
    if (m.zero3Leaf())
      for (const auto& p : m.namedParameters()) add(p.tensor);
    else
      for (const auto& p : m.ownParameters()) add(p.tensor);
    for (const Tensor& t : m.usedParameters()) add(t);
    return out;
  }

  // Reference-counted full values of bucket i (all-gathered from the shards).
  void acquire(std::size_t i) {
    if (refs_[i]++ > 0) return;
    params_->allocateValues(i);
    const std::span<const float> shard(value_shards_[i].data(), static_cast<std::size_t>(shards_[i].size));
    wire::allgatherValues(holdersOf(i), shard, params_->buckets()[i].valueSpan(), params_->buckets()[i].dtype);
  }

  void release(std::size_t i) {
    if (--refs_[i] == 0) params_->releaseValues(i);
  }

  // A shard of every bucket, in the bucket's dtype.
  std::vector<optim::StateBuffer> makeShards(const nn::FlatParameters& params, bool on_host) {
    std::vector<optim::StateBuffer> out;
    for (std::size_t i = 0; i < shards_.size(); ++i)
      out.emplace_back(device(), shards_[i].size, on_host, params.buckets()[i].dtype);
    return out;
  }

  // The ranks holding bucket i's parameters: every rank (HYBRID_SHARD: the
  // shard group), or for experts those holding the same experts.
  comm::ProcessGroup& holdersOf(std::size_t i) {
    if (i < expert_buckets_.size() && expert_buckets_[i]) return *experts_.same_experts;
    return shard_group_ ? *shard_group_ : group();
  }
  // How many ranks hold each element of bucket i's shards alike: the
  // replicas of HYBRID_SHARD, else 1.
  int replicasOf(std::size_t i) const {
    return replicas_ && !(i < expert_buckets_.size() && expert_buckets_[i]) ? replicas_->size() : 1;
  }
  static void addBucket(std::vector<std::size_t>& buckets, std::size_t b) {
    if (std::find(buckets.begin(), buckets.end(), b) == buckets.end()) buckets.push_back(b);
  }

  // FSDP: the stage and offload its settings give, no DeepSpeed config (the
  // Trainer's accumulation and clipping, any optimizer).
  void configureFsdp() {
    settings_ = DeepSpeedSettings{};
    settings_.stage = fsdp_->stage;
    settings_.offload_optimizer = fsdp_->cpu_offload;
    settings_.offload_parameters = fsdp_->cpu_offload && fsdp_->stage == 3;
    settings_.allow_untested_optimizer = true;
    if (!isGlobalZero()) return;
    const std::string hybrid =
        replicas_ ? fmt::format(" within groups of {} ranks, {} replicas", shard_group_->size(), replicas_->size()) : "";
    spdlog::info("{}: sharding_strategy {} (ZeRO stage {}{}){}, state_dict_type {}", name(), fsdp_->sharding_strategy,
                 settings_.stage, hybrid, fsdp_->cpu_offload ? ", cpu_offload" : "",
                 fsdp_->whole_optimizer_state ? "full" : "sharded");
  }

  // FSDP's units under a wrap policy: each module of the policy's classes
  // (and each ZeRO-3 leaf, with everything under it) holds the parameters of
  // its subtree outside nested units, and the root unit the rest.
  class WrapUnits {
   public:
    WrapUnits(nn::Module& model, const std::vector<std::string>& classes) {
      for (nn::Module* m : nn::modulesOfClasses(model, classes, "trainer.strategy.init_args.auto_wrap_policy"))
        if (m != &model) units_[m];  // the root is always a unit: its parameters are the step's
      collect(model, root_);
    }
    const std::vector<Tensor>& rootParameters() const { return root_; }
    const std::vector<Tensor>& parametersOf(const nn::Module& m) const {
      static const std::vector<Tensor> kNone;
      const auto it = units_.find(&m);
      return it == units_.end() ? kNone : it->second;
    }

   private:
    void collect(const nn::Module& m, std::vector<Tensor>& into) {
      const bool leaf = m.zero3Leaf();
      std::vector<Tensor>& own = leaf || units_.count(&m) ? units_[&m] : into;
      for (const auto& p : m.ownParameters()) own.push_back(p.tensor);
      for (const Tensor& t : m.usedParameters()) own.push_back(t);
      for (const auto& [name, child] : m.children()) leaf ? collectAll(*child, own) : collect(*child, own);
    }
    void collectAll(const nn::Module& m, std::vector<Tensor>& into) {
      units_.erase(&m);
      for (const auto& p : m.ownParameters()) into.push_back(p.tensor);
      for (const Tensor& t : m.usedParameters()) into.push_back(t);
      for (const auto& [name, child] : m.children()) collectAll(*child, into);
    }
    std::map<const nn::Module*, std::vector<Tensor>> units_;
    std::vector<Tensor> root_;
  };

  // Stages 0 and 1 all-reduce whole gradients once per optimizer step;
  // stages 2 and 3 reduce-scatter every micro-batch, so no rank ever holds
  // more than one micro-batch's full gradients.
  bool reducesNow(MicroBatch m) const { return m.last || settings_.stage >= 2; }

  void reduce(nn::FlatParameters& params, std::size_t i) {
    reduced_[i] = true;
    auto grads = params.buckets()[i].gradSpan();
    comm::ProcessGroup& holders = holdersOf(i);
    // An expert's gradient sums its expert-parallel group's tokens: 1 / ep
    // of it averaged over its holders is the average over every rank.
    if (expert_buckets_[i] && grads.data() != nullptr)
      for (float& g : grads) g /= static_cast<float>(ep_);
    if (settings_.stage < 2) {
      if (!bf16_grad_wire_) {
        pending_[i] = holders.allreduceAsync(grads, comm::ReduceOp::kAvg);
        return;
      }
      wire::toBits(grads, wire_[i]);  // read back in afterBackward
      pending_[i] = holders.allreduceAsync(wire::bitsView(wire_[i], grads.size()), {.op = comm::ReduceOp::kAvg});
      return;
    }
    const auto shard = static_cast<std::size_t>(shards_[i].size);
    const DType dtype = grad_shards_[i].dtype();
    // HYBRID_SHARD: the shard, averaged within the shard group, is averaged
    // over its replicas too.
    comm::ProcessGroup* replicas = replicasOf(i) > 1 ? replicas_.get() : nullptr;
    const auto scatter = [&](float* into) {
      if (!bf16_grad_wire_) {
        holders.reduceScatter(comm::ConstBufferView(std::span<const float>(grads)), std::span<float>(into, shard),
                              comm::ReduceOp::kAvg);
        if (replicas != nullptr) replicas->allreduce(std::span<float>(into, shard), comm::ReduceOp::kAvg);
        return;
      }
      std::vector<std::uint16_t> in, out(into != nullptr ? shard : 0);
      wire::toBits(grads, in);
      holders.reduceScatter(wire::bitsView(in, grads.size()), wire::bitsView(out, shard), comm::ReduceOp::kAvg);
      if (replicas != nullptr) replicas->allreduce(wire::bitsView(out, shard), {.op = comm::ReduceOp::kAvg});
      wire::fromBits(out, std::span<float>(into, into != nullptr ? shard : 0));
    };
    // Accumulation adds each micro-batch's shard to the step's, in the
    // shard's dtype.
    if (first_micro_batch_) {
      scatter(grad_shards_[i].data());
    } else {
      optim::StateBuffer part(device(), shards_[i].size, grad_shards_[i].onHost(), dtype);
      scatter(part.data());
      if (float* acc = grad_shards_[i].data(); acc != nullptr)
        for (std::size_t j = 0; j < shard; ++j) acc[j] += part.data()[j];
    }
    if (float* acc = grad_shards_[i].data(); acc != nullptr && dtype != DType::kFloat32)
      device::roundInPlace({acc, shard}, dtype);
    params.releaseGrads(i);  // only this rank's shard of the gradient stays
  }

  config::Node init_args_;
  Environment env_;
  std::optional<FsdpSettings> fsdp_;  // HPUFSDPStrategy
  std::string precision_;             // the run's (usePrecision)
  std::unique_ptr<comm::ProcessGroup> shard_group_, replicas_;  // HYBRID_SHARD's
  std::unique_ptr<WrapUnits> units_;  // FSDP's auto_wrap_policy
  int ep_ = 1;                        // expert_parallel_size
  ExpertGroups experts_;              // ep_ > 1: split from the job's group
  std::vector<bool> expert_buckets_;  // per bucket: it holds experts
  DeepSpeedSettings settings_;
  std::vector<Shard> shards_;
  std::vector<optim::StateBuffer> grad_shards_, value_shards_;
  std::vector<comm::Work> pending_;
  std::vector<bool> reduced_;
  bool first_micro_batch_ = true;
  bool half_model_ = false;      // bf16 or fp16 parameters: fp32 masters in the optimizer
  bool bf16_grad_wire_ = false;  // gradients reduced as bf16
  std::vector<std::vector<std::uint16_t>> wire_;  // per bucket: bf16 gradients in flight (stages 0 and 1)
  nn::FlatParameters* params_ = nullptr;
  std::vector<int> refs_;
  std::vector<std::size_t> step_buckets_;
};

// DeepSpeedStrategy's keys that configure what hpu-train does not emulate
// or always does one way: their (lightning-habana's) defaults only.
constexpr const char* kNoNvme =
    "NVMe offload is not emulated: offload_optimizer and offload_parameters keep their shards in host memory";
constexpr const char* kZeroAlways = "hpu-train's ZeRO always does so (flat buckets, reduce-scatter as backward "
                                    "completes each bucket, all-gather of the updated shards)";
constexpr const char* kBucketsInConfig =
    "hpu-train sizes its buckets from the DeepSpeed config (init_args.config: zero_optimization.reduce_bucket_size) "
    "or its own default; set it there";
constexpr const char* kLossScaleInConfig =
    "hpu-train takes DeepSpeed's fp16 loss scaler from the DeepSpeed config (init_args.config: fp16.loss_scale, "
    "initial_scale_power, loss_scale_window, hysteresis, min_loss_scale); set it there";
constexpr const char* kNoDeepSpeedLogging =
    "there is no DeepSpeed engine to log; hpu-train's progress and metrics go through its own loggers";

std::vector<config::ParamSpec> deepspeedParams(const char* stage, const char* offload_optimizer,
                                               const char* offload_parameters) {
  using config::Type;
  const auto fixedInt = [](const char* name, const char* value, const char* doc, const char* because) {
    return config::ParamSpec{name, Type::integer(), value, doc, because};
  };
  const auto fixedBool = [](const char* name, const char* value, const char* doc, const char* because) {
    return config::ParamSpec{name, Type::boolean(), value, doc, because};
  };
  // lightning-habana's order (strategies/deepspeed.py).
  return {trainerPartParam("accelerator", "trainer.accelerator"),
          {"zero_optimization", Type::boolean(), "true", "Use ZeRO (false: plain data parallel)."},
          {"stage", Type::integer().min(0).max(3), stage, "ZeRO stage: 1 optimizer state, 2 + gradients, 3 + parameters."},
          {"remote_device", Type::optional(Type::string()), "null", "Stage 3: where parameters are initialised.",
           "stage 3 builds the model's parameters in host memory and partitions them itself"},
          {"offload_optimizer", Type::boolean(), offload_optimizer, "Keep optimizer state and gradient shards in host memory."},
          {"offload_parameters", Type::boolean(), offload_parameters, "Stage 3: keep parameter shards in host memory."},
          {"offload_params_device", Type::string(), "cpu", "Where offloaded parameters go.", kNoNvme},
          {"nvme_path", Type::string(), "/local_nvme", "NVMe offload directory.", kNoNvme},
          fixedInt("params_buffer_count", "5", "NVMe parameter buffers.", kNoNvme),
          fixedInt("params_buffer_size", "100000000", "NVMe parameter buffer size.", kNoNvme),
          fixedInt("max_in_cpu", "1000000000", "Parameters kept in host memory under NVMe offload.", kNoNvme),
          {"offload_optimizer_device", Type::string(), "cpu", "Where offloaded optimizer state goes.", kNoNvme},
          fixedInt("optimizer_buffer_count", "4", "NVMe optimizer buffers.", kNoNvme),
          fixedInt("block_size", "1048576", "NVMe I/O block size.", kNoNvme),
          fixedInt("queue_depth", "8", "NVMe I/O queue depth.", kNoNvme),
          fixedBool("single_submit", "false", "NVMe I/O submission.", kNoNvme),
          fixedBool("overlap_events", "true", "NVMe I/O event overlap.", kNoNvme),
          fixedInt("thread_count", "1", "NVMe I/O threads.", kNoNvme),
          fixedBool("pin_memory", "false", "Pin the offloaded host buffers.",
                    "the emulated device reads host memory directly; there is no pinned memory to ask for"),
          fixedInt("sub_group_size", "1000000000000", "Parameters per optimizer step group.",
                   "the optimizer steps each rank's shard of every bucket at once"),
          fixedBool("contiguous_gradients", "true", "Copy gradients into one contiguous buffer.", kZeroAlways),
          fixedBool("overlap_comm", "true", "Reduce gradients while backward runs.", kZeroAlways),
          fixedBool("allgather_partitions", "true", "All-gather the updated shards (not broadcast).", kZeroAlways),
          fixedBool("reduce_scatter", "true", "Reduce-scatter gradients (not all-reduce).", kZeroAlways),
          fixedInt("allgather_bucket_size", "200000000", "Elements per all-gather.", kBucketsInConfig),
          fixedInt("reduce_bucket_size", "200000000", "Elements per reduce-scatter.", kBucketsInConfig),
          {"zero_allow_untested_optimizer", Type::boolean(), "true",
           "Shard optimizers other than Adam and AdamW (used when no DeepSpeed config is given; a config says it "
           "itself, false by default)."},
          {"logging_batch_size_per_gpu", Type::anyOf({Type::string({"auto"}), Type::integer().min(1)}), "auto",
           "Batch size DeepSpeed's throughput log assumes.", kNoDeepSpeedLogging},
          {"config", Type::optional(Type::anyOf({Type::dict(), Type::path(config::PathKind::kFile)})), "null",
           "A DeepSpeed config: a mapping, or the path of a DeepSpeed JSON file (also PL_DEEPSPEED_CONFIG_PATH)."},
          fixedInt("logging_level", "30", "DeepSpeed's log level (logging.WARN).", kNoDeepSpeedLogging),
          {"expert_parallel_size", Type::integer().min(1), "1",
           "hpu-train's own: ranks each MoE layer's experts are split across (Mixtral), DeepSpeed-MoE's ep_size "
           "(which DeepSpeed takes as an argument of its MoE layer, not as a DeepSpeed config key): each rank holds "
           "experts / size of them and sends each token to the rank holding its experts (all-to-all); the experts' "
           "gradients and ZeRO-1/2 shards are shared with the ranks holding the same experts. Must divide the world "
           "size and the experts; ZeRO stage 3 takes 1.",
           "", true},
          {"parallel_devices", Type::optional(Type::list(Type::string())), "null",
           "Devices to use (their count must match trainer.devices)."},
          clusterEnvironmentParam(),
          {"loss_scale", Type::real(), "0", "fp16: a static loss scale (0: dynamic).", kLossScaleInConfig},
          fixedInt("initial_scale_power", "16", "fp16: the dynamic scale starts at 2^this.", kLossScaleInConfig),
          fixedInt("loss_scale_window", "1000", "fp16: clean steps before the scale grows.", kLossScaleInConfig),
          fixedInt("hysteresis", "2", "fp16: overflows tolerated before the scale shrinks.", kLossScaleInConfig),
          fixedInt("min_loss_scale", "1", "fp16: the smallest scale.", kLossScaleInConfig),
          {"partition_activations", Type::boolean(), "false", "Partition activation checkpoints across ranks."},
          {"cpu_checkpointing", Type::boolean(), "false", "Keep activation checkpoints in host memory."},
          fixedBool("contiguous_memory_optimization", "false", "Copy activation checkpoints into one buffer.",
                    "hpu-train's activation checkpointing keeps each checkpoint where it was made"),
          fixedBool("synchronize_checkpoint_boundary", "false", "Synchronize at activation checkpoint boundaries.",
                    "activation checkpointing runs in the ranks' own order of ops; there is no boundary to synchronize"),
          fixedBool("load_full_weights", "false", "Load a single-file checkpoint into the sharded model.",
                    "hpu-train reads a checkpoint's layout from its files, whole or sharded, without being told"),
          trainerPartParam("precision_plugin", "trainer.precision or trainer.plugins (HPUDeepSpeedPrecisionPlugin)"),
          {"process_group_backend", Type::string({"hccl"}), "hccl", "Collective backend.",
           "HPUs communicate through HCCL, which hpu-train's collectives emulate"}};
}

HPU_REGISTER_COMPONENT(
    Strategy,
    config::ComponentSchema{config::ComponentKind::kStrategy,
                            "HPUDeepSpeedStrategy",
                            "lightning_habana",
                            {"HPUDeepSpeedStrategy", "", deepspeedParams("2", "false", "false")},
                            "ZeRO data parallelism (DeepSpeed's stages 0-3, offload).",
                            {"lightning.pytorch.strategies.DeepSpeedStrategy"}},
    [](const config::Params& p) -> std::unique_ptr<Strategy> {
      return std::make_unique<DeepSpeedStrategy>(p.values(), Environment{});
    });

}  // namespace

std::unique_ptr<Strategy> makeDeepSpeedStrategy(const config::Node& init_args, const Environment& env) {
  return std::make_unique<DeepSpeedStrategy>(init_args, env);
}

std::unique_ptr<Strategy> makeFsdpStrategy(config::Node init_args, FsdpSettings fsdp) {
  return std::make_unique<DeepSpeedStrategy>(std::move(init_args), std::move(fsdp));
}

}  // namespace hpu::core
