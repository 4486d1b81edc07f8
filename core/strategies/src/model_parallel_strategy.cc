// ModelParallelStrategy (Lightning 2.4's): tensor parallelism inside
// pipeline parallelism (hpu-train's own pipeline_parallel_size) inside data
// parallelism, over a mesh of dp x pp x tp ranks. Rank r is tensor-parallel
// rank r % tp of pipeline stage r / tp % pp of data-parallel rank
// r / (tp pp): a tensor-parallel group is consecutive ranks, inside a node
// whenever tp divides the devices per node, where its all-reduces (two per
// transformer block, each way) use the fast links; stages and replicas
// spread over the nodes.
//  - Pipeline: each stage holds a run of the decoder layers (module/
//    pipeline_module.h), or with virtual stages (virtual_pipeline_size or
//    layers_per_virtual_stage) several runs, chunks s, s + P, ... of the
//    layers cut into P x chunks; an optimizer step's micro-batches
//    (accumulate_grad_batches) run in the 1F1B schedule, interleaved over
//    the chunks (Megatron-LM's interleaved schedule, pipeline_order.h),
//    activations and their gradients sent between neighbouring stages (a
//    ring with virtual stages: the last stage feeds the first stage's next
//    chunk) (pipeline_schedule.h);
//    the last stage's losses are broadcast to the others, so every rank
//    logs them. A tied embedding's gradients are summed over the first and
//    last stage, as Megatron-LM's embedding group does.
//  - zero_stage 1: each data-parallel rank keeps the optimizer state of its
//    part of every bucket and steps that part; the updated parts are
//    all-gathered over the data-parallel group. Checkpoints hold the whole
//    state (gathered when saved), so any layout resumes them. Under a half
//    precision it is Megatron-LM's distributed optimizer: a bf16 (fp16)
//    model, fp32 masters in the parts, fp32 gradients.
//  - Model: built with the tensor-parallel group (InitContext::
//    tensor_parallel); Llama and GPT-2 split their layers as Megatron-LM
//    does (nn/layers/linear.h, self_attention.h, embedding.h), and the loss
//    is the vocabulary-parallel cross-entropy.
//  - Parameters: each rank draws its piece from the whole parameter's draws
//    (nn/init.h), so every layout starts from one device's weights; values
//    are broadcast from data-parallel rank 0 within each data-parallel group.
//  - Gradients: averaged over the data-parallel group per bucket, as DDP
//    does (bucket_allreduce.h). The norm for clipping sums the split
//    parameters over the tensor-parallel group and counts the others once.
//  - Data: each data-parallel rank reads its part; the tensor-parallel ranks
//    of one data-parallel rank read the same batches.
//  - Expert parallelism (expert_parallel_size ep, dividing the data-parallel
//    size; Megatron-LM's and DeepSpeed-MoE's layout): ep consecutive
//    data-parallel replicas split every MoE layer's experts between them
//    (InitContext::expert_parallel) and exchange tokens with all-to-alls;
//    the rest of the model stays replicated. An expert's gradient already
//    sums its expert-parallel group's tokens: it is averaged over the ranks
//    holding the same experts (dp / ep of them) and scaled by 1 / ep, so it
//    is the data-parallel average one device's copy would get; under ZeRO-1
//    its optimizer state is sharded over those copies. Checkpoints
//    are written by every rank (its experts in its own file) and assembled
//    into the whole form as a pipeline's are.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <optional>

#include "bf16_wire.h"
#include "bucket_allreduce.h"
#include "comm_parallel_group.h"
#include "distributed_strategy.h"
#include "expert_parallel.h"
#include "pipeline_schedule.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/module/pipeline_module.h"
#include "hpu/core/strategies/strategy.h"
#include "trainer_part_param.h"

namespace hpu::core {
namespace {

class ModelParallelStrategy final : public DistributedStrategy {
 public:
  // Sizes unset: "auto" (Lightning's rule: data_parallel_size = nodes,
  // tensor_parallel_size = devices per node; with pipeline stages, the data
  // parallel size fills the rest of the world).
  ModelParallelStrategy(std::optional<int> data_parallel_size, std::optional<int> tensor_parallel_size,
                        bool save_distributed_checkpoint, bool sequence_parallel, int pipeline_parallel_size,
                        std::vector<int> pipeline_layers, nn::VirtualStages virtual_stages, int zero_stage,
                        int expert_parallel_size, std::string cluster_environment)
      : DistributedStrategy(std::move(cluster_environment)),
        dp_(data_parallel_size),
        tp_(tensor_parallel_size),
        pp_(pipeline_parallel_size),
        ep_(expert_parallel_size),
        pipeline_layers_(std::move(pipeline_layers)),
        virtual_(std::move(virtual_stages)),
        save_distributed_(save_distributed_checkpoint),
        sequence_parallel_(sequence_parallel),
        zero_(zero_stage == 1) {}
  ~ModelParallelStrategy() override { releaseSubgroups(); }

  std::string name() const override { return "ModelParallelStrategy"; }

  void setup(const RunEnvironment& run, device::Platform& platform) override {
    const int world = run.devices_per_node * run.num_nodes;
    const int tp = tp_.value_or(run.devices_per_node);
    const int dp = dp_.value_or(pp_ == 1 ? run.num_nodes : std::max(1, world / (tp * pp_)));
    // Checked before any worker starts: one message, from the launching process.
    if (dp * tp * pp_ != world) {
      const std::string sizes =
          pp_ > 1 ? fmt::format("data_parallel_size={}, tensor_parallel_size={} and pipeline_parallel_size={}", dp, tp, pp_)
                  : fmt::format("data_parallel_size={} and tensor_parallel_size={}", dp, tp);
      throw UsageError(fmt::format("trainer.strategy: the sizes {} multiplied should equal the world size ({} = "
                                   "trainer.devices {} x trainer.num_nodes {})",
                                   sizes, world, run.devices_per_node, run.num_nodes));
    }
    if (ep_ > 1 && dp % ep_ != 0)
      refuseExpertParallelSize(ep_, fmt::format("the experts split across data-parallel replicas, and {} does not "
                                                "divide data_parallel_size {}",
                                                ep_, dp));
    if (!pipeline_layers_.empty() && static_cast<int>(pipeline_layers_.size()) != pp_ * virtual_.count)
      throw UsageError(
          virtual_.count > 1
              ? fmt::format("trainer.strategy.init_args.pipeline_layers: {} counts for {} model chunks "
                            "(pipeline_parallel_size {} x virtual_pipeline_size {}); give one count of decoder layers "
                            "per chunk, in the model's order",
                            pipeline_layers_.size(), pp_ * virtual_.count, pp_, virtual_.count)
              : fmt::format("trainer.strategy.init_args.pipeline_layers: {} counts for {} pipeline stages "
                            "(pipeline_parallel_size); give one count of decoder layers per stage",
                            pipeline_layers_.size(), pp_));
    DistributedStrategy::setup(run, platform);
    dp_size_ = dp;
    const int r = globalRank(), model = tp * pp_;
    stage_ = r / tp % pp_;
    std::vector<int> tp_ranks, dp_ranks, pp_ranks, model_ranks;
    for (int k = 0; k < tp; ++k) tp_ranks.push_back(r / tp * tp + k);
    for (int k = 0; k < dp; ++k) dp_ranks.push_back(k * model + r % model);
    for (int k = 0; k < pp_; ++k) pp_ranks.push_back(r / model * model + k * tp + r % tp);
    for (int k = 0; k < model; ++k) model_ranks.push_back(r / model * model + k);
    tensor_ = std::make_unique<CommParallelGroup>(group().split(tp_ranks));
    data_ = group().split(dp_ranks);
    if (ep_ > 1) {
      // The expert groups, and every rank of this rank's expert-parallel
      // replicas (whose gradient norm counts each expert once).
      experts_ = splitExpertGroups(group(), r, dp, model, ep_);
      std::vector<int> ep_model;
      for (int k = 0; k < ep_ * model; ++k) ep_model.push_back(r / model / ep_ * ep_ * model + k);
      expert_model_ = group().split(ep_model);
    }
    if (pp_ > 1) {
      // The links to the neighbouring stages and, on the first and last
      // stage, the pair that sums a tied embedding's gradients.
      pipeline_ = group().split(pp_ranks);
      model_ = group().split(model_ranks);
      // With virtual stages the links form a ring (the last stage's next is the first).
      const bool ring = interleaved();
      const auto link = [&](int from) {
        std::vector<int> pair{pp_ranks[static_cast<std::size_t>(from)], pp_ranks[static_cast<std::size_t>((from + 1) % pp_)]};
        std::sort(pair.begin(), pair.end());
        return StageLinks::Link{group().split(pair), group().split(pair)};
      };
      // Split in the order of the stage they leave from, so that with two
      // stages in a ring (both links join the same two ranks) both ranks
      // split them alike.
      const int from_previous = stage_ > 0 ? stage_ - 1 : ring ? pp_ - 1 : -1;
      const int from_here = stage_ + 1 < pp_ || ring ? stage_ : -1;
      StageLinks::Link previous, next;
      if (from_previous >= 0 && from_previous < from_here) previous = link(from_previous);
      if (from_here >= 0) next = link(from_here);
      if (from_previous >= 0 && from_previous >= from_here) previous = link(from_previous);
      links_ = std::make_unique<StageLinks>(device(), std::move(previous), std::move(next));
      if (stage_ == 0 || stage_ == pp_ - 1) embedding_ = group().split({pp_ranks.front(), pp_ranks.back()});
    }
    if (isGlobalZero())
      spdlog::info("{}: {} data-parallel x {}{} tensor-parallel ranks (tensor-parallel groups of consecutive ranks){}",
                   name(), dp,
                   pp_ == 1             ? ""
                   : virtual_.count > 1 ? fmt::format("{} pipeline stages ({} virtual stages each) x ", pp_, virtual_.count)
                   : virtual_.layers > 0
                       ? fmt::format("{} pipeline stages (virtual stages of {} layers) x ", pp_, virtual_.layers)
                       : fmt::format("{} pipeline stages x ", pp_),
                   tp,
                   ep_ > 1 ? fmt::format("; experts split across {} data-parallel replicas", ep_) : "");
  }

  ops::ParallelGroup* tensorParallelGroup() override { return tensor_.get(); }
  std::optional<std::int64_t> vocabDivisibleBy() const override { return vocab_divisible_by_; }
  // See makeDeepSpeedInferenceStrategy.
  void padVocabularyTo(std::int64_t multiple) { vocab_divisible_by_ = multiple; }
  ops::ParallelGroup* expertParallelGroup() override { return experts_.experts.get(); }
  bool savesDistributedCheckpoint() const override { return save_distributed_; }
  bool sequenceParallel() const override { return sequence_parallel_ && tensor_->size() > 1; }
  int pipelineStages() const override { return pp_; }
  int pipelineStage() const override { return stage_; }
  std::vector<int> pipelineLayers() const override { return pipeline_layers_; }
  nn::VirtualStages pipelineVirtualStages() const override { return virtual_; }

  // The interleaved schedule runs micro-batches in groups of the stages
  // (Megatron-LM's condition); an epoch's short last step runs its
  // remainder after the whole groups (pipeline_order.h).
  void configureTraining(TrainingSettings& o, std::int64_t) override {
    if (!interleaved() || o.accumulate_grad_batches % pp_ == 0) return;
    const std::int64_t below = o.accumulate_grad_batches / pp_ * pp_, above = below + pp_;
    throw ConfigError(fmt::format(
        "{}{}: the interleaved schedule runs micro-batches in groups of pipeline_parallel_size (as Megatron-LM's): "
        "trainer.accumulate_grad_batches {} is not a multiple of {}; set it to {}",
        virtual_.origin.empty() ? "" : virtual_.origin + ": ", virtualKey(), o.accumulate_grad_batches, pp_,
        below > 0 ? fmt::format("{} or {}", below, above) : std::to_string(above)));
  }

  std::vector<double> runPipeline(PipelineWork& work, std::size_t micro_batches, bool backward) override {
    HPU_CHECK(links_ != nullptr, "runPipeline without pipeline stages");
    HPU_CHECK(work.chunks() == 1 || interleaved(), "{} model chunks without virtual stages", work.chunks());
    std::vector<double> losses = runSchedule(work, *links_, stage_, pp_, work.chunks(), micro_batches, backward);
    // The last stage's losses, on every stage.
    std::vector<float> values(losses.begin(), losses.end());
    pipeline_->broadcast(comm::BufferView(std::span<float>(values)), pp_ - 1);
    return {values.begin(), values.end()};
  }

  std::vector<float> wholeOf(std::span<const float> piece, const Shard& shard, const Shape& local) override {
    if (shard.parts == 1) return Strategy::wholeOf(piece, shard, local);
    const int ranks = tensor_->size();
    std::vector<float> pieces(piece.size() * static_cast<std::size_t>(ranks));
    tensor_->allgather(piece.data(), piece.size(), DType::kFloat32, pieces.data());
    std::vector<float> whole(static_cast<std::size_t>(shard.fullShape(local).numel()));
    for (int k = 0; k < ranks; ++k)
      shard.ofRank(k, ranks).place(local, std::span<const float>(pieces).subspan(k * piece.size(), piece.size()), whole);
    return whole;
  }

  void setupParameters(nn::Module& model, nn::FlatParameters& params,
                       const std::vector<nn::NamedTensor>& buffers) override {
    // Experts from the first of the replicas holding the same ones, the rest from the first replica.
    std::vector<comm::ProcessGroup*> sources;
    std::vector<BucketAllreduce::Reduction> reductions;
    expert_buckets_ = expertBuckets(params, buffers, ep_);
    for (const bool expert : expert_buckets_) {
      sources.push_back(expert ? experts_.same_experts.get() : nullptr);
      reductions.push_back(expert ? BucketAllreduce::Reduction{experts_.same_experts.get(), 1.0f / static_cast<float>(ep_)}
                                  : BucketAllreduce::Reduction{});
    }
    broadcastParameters(params, buffers, data_.get(), sources, experts_.same_experts.get());
    if (ep_ > 1) model.setForwardHooks(std::make_shared<ExpertGradientCompletion>(params));
    sync_.setup(params, std::move(reductions));
    shared_.clear();
    if (embedding_)
      if (const auto* stages = dynamic_cast<const PipelineModule*>(&model)) shared_ = stages->stageSharedParameters();
  }

  // Under pipeline parallelism a step's micro-batches run in one schedule:
  // the data-parallel all-reduce waits for its end (no overlap with the
  // backwards), after the stages' shared parameters are summed.
  void beforeBackward(nn::FlatParameters& params, MicroBatch m) override {
    if (pp_ > 1) m.last = false;
    sync_.beforeBackward(*data_, params, m);
  }
  void afterBackward(nn::FlatParameters& params, MicroBatch m) override {
    if (m.last && embedding_)
      for (const Tensor& t : shared_) {
        Tensor grad = t.grad();
        const auto n = static_cast<std::size_t>(grad.numel());
        embedding_->allreduce(std::span<float>(grad.shapeOnly() ? nullptr : grad.data(), n), comm::ReduceOp::kSum);
      }
    sync_.afterBackward(*data_, params, m);
  }

  // ZeRO-1: each data-parallel rank steps its part of every bucket (the
  // balanced partition of the data-parallel group's all-gather), keeping
  // the optimizer state of that part only, then the parts are gathered.
  // ZeRO-1 is Megatron-LM's distributed optimizer: under a half precision the
  // model is held in bf16 (fp16), the fp32 masters in the optimizer's parts,
  // gradients accumulated and reduced in fp32 (Megatron-LM's
  // accumulate_allreduce_grads_in_fp32), the updated parts gathered in the
  // model's dtype.
  bool holdsHalfModel() const override { return zero_; }
  std::optional<DType> gradientDtype() const override {
    return zero_ ? std::optional(DType::kFloat32) : std::nullopt;
  }

  // The data-parallel replicas that hold bucket b's parameters: all of
  // them, or for experts those holding the same experts.
  comm::ProcessGroup& replicasOf(const nn::ParamBucket& b) const {
    return b.members.front().expert_parallel > 1 ? *experts_.same_experts : *data_;
  }

  std::vector<SliceShard> optimizerShards(nn::FlatParameters& params) override {
    std::vector<SliceShard> out;
    for (std::size_t i = 0; i < params.buckets().size(); ++i) {
      const auto& b = params.buckets()[i];
      comm::ProcessGroup& group = replicasOf(b);
      const auto part = comm::ProcessGroup::shardRange(static_cast<std::size_t>(b.numel), zero_ ? group.size() : 1,
                                                       zero_ ? group.rank() : 0);
      out.push_back({static_cast<std::int64_t>(part.offset), static_cast<std::int64_t>(part.size), b.numel, i});
    }
    return out;
  }
  std::vector<optim::ParamSlice> optimizerSlices(nn::FlatParameters& params) override {
    std::vector<optim::ParamSlice> slices;
    const std::vector<SliceShard> shards = optimizerShards(params);
    for (std::size_t i = 0; i < shards.size(); ++i) {
      auto& b = params.buckets()[i];
      const auto at = static_cast<std::size_t>(shards[i].offset);
      slices.push_back({b.valueSpan().data() ? b.valueSpan().data() + at : nullptr,
                        b.gradSpan().data() ? b.gradSpan().data() + at : nullptr, shards[i].size, b.dtype,
                        /*master=*/zero_ && b.dtype != DType::kFloat32});
    }
    return slices;
  }
  void afterOptimizerStep(nn::FlatParameters& params) override {
    if (!zero_) return;
    const std::vector<SliceShard> shards = optimizerShards(params);
    for (std::size_t i = 0; i < shards.size(); ++i) {
      const std::span<float> values = params.buckets()[i].valueSpan();
      const auto n = static_cast<std::size_t>(shards[i].size);
      // The input is a copy: the all-gather's output overlaps it (a dry run's holds no values).
      std::vector<float> mine(values.data() ? n : 0);
      if (values.data()) std::copy_n(values.begin() + shards[i].offset, n, mine.begin());
      wire::allgatherValues(replicasOf(params.buckets()[i]), std::span<const float>(values.data() ? mine.data() : nullptr, n),
                            values, params.buckets()[i].dtype);
    }
  }
  bool gathersOptimizerSlices() const override { return zero_; }
  std::optional<std::vector<float>> wholeOptimizerSlice(std::span<const float> shard, const SliceShard& where) override {
    if (!gathersOptimizerSlices()) return std::nullopt;
    std::vector<float> whole(static_cast<std::size_t>(where.total));
    (where.bucket < expert_buckets_.size() && expert_buckets_[where.bucket] ? *experts_.same_experts : *data_)
        .allgather(comm::ConstBufferView(shard), comm::BufferView(std::span<float>(whole)));
    return whole;
  }

  optim::GradientView gradients(nn::FlatParameters& params) override {
    optim::GradientView v;
    const double ranks = tensor_->size();
    const std::vector<SliceShard> shards = optimizerShards(params);
    for (std::size_t i = 0; i < shards.size(); ++i) {
      auto& b = params.buckets()[i];
      const std::span<float> grads = b.gradSpan();
      const std::int64_t lo = shards[i].offset, hi = lo + shards[i].size;
      for (std::size_t j = 0; j < b.members.size(); ++j) {
        const nn::NamedTensor& m = b.members[j];
        // This rank's part of the member (under ZeRO-1, of its shard).
        const std::int64_t from = std::max(lo, b.offsets[j]), to = std::min(hi, b.offsets[j] + m.tensor.numel());
        if (from >= to) continue;
        v.spans.push_back(grads.subspan(static_cast<std::size_t>(from), static_cast<std::size_t>(to - from)));
        // A piece held by ranks / parts ranks counts parts / ranks on each;
        // a stage-shared parameter counts on the first stage only.
        const bool copy = stage_ > 0 && std::any_of(shared_.begin(), shared_.end(), [&](const Tensor& t) {
                            return t.sameAs(m.tensor);
                          });
        // Without ZeRO-1, under expert parallelism the norm sums over ep
        // replicas: the rest of the model counts 1 / ep on each, every expert
        // on its rank. (ZeRO-1's parts, of every replica, hold each element once.)
        const double replicas = zero_ || m.expert_parallel > 1 ? 1.0 : ep_;
        v.weights.push_back(copy ? 0.0 : (m.shard.split() ? m.shard.parts : 1) / ranks / replicas);
      }
    }
    // Over the ranks of a replica, or under ZeRO-1 of every replica.
    v.total = [this](double partial) {
      double value[1] = {partial};
      allReduceInRankOrder(zero_         ? group()
                           : expert_model_ ? *expert_model_
                           : model_        ? *model_
                                           : tensor_->comm(),
                           value, sumOf);
      return value[0];
    };
    return v;
  }

  int dataParallelRank() const override { return globalRank() / (worldSize() / dp_size_); }

  data::SamplerOptions samplerFor(data::SamplerOptions base) const override {
    base.num_replicas = dp_size_;
    base.rank = dataParallelRank();
    return base;
  }

  void observeCollectives(std::shared_ptr<comm::CollectiveObserver> observer) override {
    DistributedStrategy::observeCollectives(observer);
    if (tensor_) tensor_->observe(observer);
    experts_.observe(observer);
    if (data_) data_->setObserver(observer);
    for (comm::ProcessGroup* g : {pipeline_.get(), model_.get(), embedding_.get(), expert_model_.get()})
      if (g) g->setObserver(observer);
    if (links_) links_->observe(observer);
  }

  int teardown(bool failed) override {
    releaseSubgroups();
    return DistributedStrategy::teardown(failed);
  }

 private:
  bool interleaved() const { return pp_ > 1 && (virtual_.count > 1 || virtual_.layers > 0); }
  std::string virtualKey() const {
    return std::string("trainer.strategy.init_args.") +
           (virtual_.layers > 0 ? "layers_per_virtual_stage" : "virtual_pipeline_size");
  }

  // Subgroups go before the group they were split from.
  void releaseSubgroups() {
    experts_.reset();
    expert_model_.reset();
    tensor_.reset();
    data_.reset();
    links_.reset();
    embedding_.reset();
    model_.reset();
    pipeline_.reset();
  }

  std::optional<int> dp_, tp_;
  int pp_, ep_;
  std::vector<int> pipeline_layers_;
  nn::VirtualStages virtual_;
  bool save_distributed_, sequence_parallel_;
  std::optional<std::int64_t> vocab_divisible_by_;  // null: the model's default
  bool zero_;  // ZeRO-1: the optimizer state sharded over the data-parallel group
  int dp_size_ = 1, stage_ = 0;
  std::unique_ptr<CommParallelGroup> tensor_;
  std::unique_ptr<comm::ProcessGroup> data_;
  std::unique_ptr<comm::ProcessGroup> pipeline_;   // this rank's pipeline: its stages, in order
  std::unique_ptr<comm::ProcessGroup> model_;      // the ranks of one data-parallel replica (tp x pp)
  std::unique_ptr<comm::ProcessGroup> embedding_;  // {first stage, last stage} of this pipeline, on those
  ExpertGroups experts_;
  std::unique_ptr<comm::ProcessGroup> expert_model_;  // every rank of experts_.experts's replicas
  std::vector<bool> expert_buckets_;                  // per bucket: it holds experts
  std::unique_ptr<StageLinks> links_;
  std::vector<Tensor> shared_;  // this rank's stage-shared parameters
  BucketAllreduce sync_;
};

// "auto" or a positive count.
config::Type sizeType() {
  return config::Type::anyOf({config::Type::string({"auto"}), config::Type::integer().min(1)});
}

std::optional<int> sizeOf(const config::Params& p, const char* key) {
  const config::Node& n = p.node(key);
  if (n.str() == "auto") return std::nullopt;
  return static_cast<int>(config::asInt(n));
}

// virtual_pipeline_size or layers_per_virtual_stage, checked against each
// other and the other pipeline settings (ConfigError at the setting).
nn::VirtualStages virtualStagesOf(const config::Params& p, int stages) {
  nn::VirtualStages v;
  v.count = static_cast<int>(p.getInt("virtual_pipeline_size"));
  const bool by_layers = p.has("layers_per_virtual_stage");
  if (by_layers && v.count > 1)
    p.fail("layers_per_virtual_stage",
           fmt::format("give virtual_pipeline_size ({}) or layers_per_virtual_stage ({}), not both: one sets the "
                       "other (virtual_pipeline_size = decoder layers / (pipeline_parallel_size x "
                       "layers_per_virtual_stage))",
                       v.count, p.getInt("layers_per_virtual_stage")));
  const char* key = by_layers ? "layers_per_virtual_stage" : "virtual_pipeline_size";
  if (!by_layers && v.count == 1) return v;
  if (by_layers) v.layers = static_cast<int>(p.getInt("layers_per_virtual_stage"));
  if (stages == 1)
    p.fail(key, "virtual pipeline stages interleave the model chunks of several pipeline stages; set "
                "pipeline_parallel_size to 2 or more, or leave " + std::string(key) + " unset");
  if (by_layers && p.has("pipeline_layers"))
    p.fail(key, "layers_per_virtual_stage cuts the layers into equal chunks, and pipeline_layers gives them one by "
                "one; give one of them (with pipeline_layers, set virtual_pipeline_size)");
  v.origin = p.node(key).loc().str();
  return v;
}

HPU_REGISTER_COMPONENT(
    Strategy,
    config::ComponentSchema{
        config::ComponentKind::kStrategy,
        "ModelParallelStrategy",
        "lightning.pytorch.strategies",
        {"ModelParallelStrategy",
         "",
         {{"data_parallel_size", sizeType(), "auto",
           "Data-parallel replicas of the model (auto: the number of nodes)."},
          {"tensor_parallel_size", sizeType(), "auto",
           "Ranks each layer is split across, Megatron-LM's way (auto: the devices per node)."},
          {"save_distributed_checkpoint", config::Type::boolean(), "true",
           "Each rank writes its own part of a checkpoint (false: one consolidated file)."},
          {"process_group_backend", config::Type::optional(config::Type::string({"hccl"})), "null",
           "Collective backend (HCCL on HPU, which hpu-train's collectives emulate)."},
          {"timeout", config::Type::optional(config::Type::string()), "0:30:00", "Collective timeout.",
           "collectives wait under hpu-train's own deadlines (comm's barrier and store timeouts)"},
          {"sequence_parallel", config::Type::boolean(), "false",
           "hpu-train's own: between the tensor-parallel regions, split activations along the sequence "
           "(norms, dropouts and residuals on each rank's positions; reduce-scatter and all-gather instead of "
           "all-reduce), as Megatron-LM's sequence parallelism.",
           "", true},
          {"pipeline_parallel_size", config::Type::integer().min(1), "1",
           "hpu-train's own: stages the decoder layers are split into (Llama, GPT-2), the embeddings on the first "
           "and the output head on the last; an optimizer step's micro-batches (accumulate_grad_batches) run in "
           "the 1F1B schedule.",
           "", true},
          {"pipeline_layers", config::Type::optional(config::Type::list(config::Type::integer().min(1))), "null",
           "hpu-train's own: decoder layers of each pipeline stage (with virtual_pipeline_size, of each model chunk), "
           "in order (null: balanced by parameter count).",
           "", true},
          {"virtual_pipeline_size", config::Type::integer().min(1), "1",
           "hpu-train's own: model chunks each pipeline stage holds (Megatron-LM's interleaved 1F1B, its "
           "--num-virtual-stages-per-pipeline-rank): the decoder layers are cut into pipeline_parallel_size x this "
           "many runs, stage s holding runs s, s + P, s + 2P, ...; the pipeline's bubble shrinks by this factor "
           "and each micro-batch crosses that many times more stage boundaries. Needs accumulate_grad_batches a "
           "multiple of pipeline_parallel_size.",
           "", true},
          {"layers_per_virtual_stage", config::Type::optional(config::Type::integer().min(1)), "null",
           "hpu-train's own: the same as decoder layers per model chunk (Megatron-LM's "
           "--num-layers-per-virtual-pipeline-stage): virtual_pipeline_size = layers / (pipeline_parallel_size x "
           "this). Give this or virtual_pipeline_size, not both.",
           "", true},
          {"expert_parallel_size", config::Type::integer().min(1), "1",
           "hpu-train's own: data-parallel replicas each MoE layer's experts are split across (Mixtral; "
           "DeepSpeed-MoE's ep_size, Megatron-LM's expert_model_parallel_size): each holds experts / size of them "
           "and sends each token to the replica holding its experts (all-to-all); must divide data_parallel_size "
           "and the experts.",
           "", true},
          {"zero_stage", config::Type::integer().min(0).max(1), "0",
           "hpu-train's own: 1 shards the optimizer state over the data-parallel group (ZeRO-1, Megatron-LM's "
           "distributed optimizer: under bf16-mixed, bf16-true or fp8 the model is held in bf16, the fp32 master "
           "weights in the optimizer state); 0 keeps it whole on every replica.",
           "", true}}},
        "Tensor, pipeline and data parallelism (Llama, GPT-2: attention heads, MLP and vocabulary split across "
        "the tensor-parallel ranks; decoder layers across pipeline stages).",
        {}},
    [](const config::Params& p) {
      std::vector<int> layers;
      if (p.has("pipeline_layers"))
        for (const config::Node& n : p.node("pipeline_layers").items()) layers.push_back(static_cast<int>(config::asInt(n)));
      const int stages = static_cast<int>(p.getInt("pipeline_parallel_size"));
      return std::make_unique<ModelParallelStrategy>(
          sizeOf(p, "data_parallel_size"), sizeOf(p, "tensor_parallel_size"), p.getBool("save_distributed_checkpoint"),
          p.getBool("sequence_parallel"), stages, std::move(layers), virtualStagesOf(p, stages),
          static_cast<int>(p.getInt("zero_stage")), static_cast<int>(p.getInt("expert_parallel_size")), "");
    });

}  // namespace

std::unique_ptr<Strategy> makeDeepSpeedInferenceStrategy(std::optional<int> data_parallel_size,
                                                         std::optional<int> tensor_parallel_size) {
  auto s = std::make_unique<ModelParallelStrategy>(data_parallel_size, tensor_parallel_size,
                                                   /*save_distributed_checkpoint=*/true, /*sequence_parallel=*/false,
                                                   /*pipeline_parallel_size=*/1, std::vector<int>{}, nn::VirtualStages{},
                                                   /*zero_stage=*/0, /*expert_parallel_size=*/1, "");
  s->padVocabularyTo(1);
  return s;
}

std::unique_ptr<ops::ParallelGroup> makeTensorParallelGroup(std::unique_ptr<comm::ProcessGroup> group) {
  return std::make_unique<CommParallelGroup>(std::move(group));
}

}  // namespace hpu::core
