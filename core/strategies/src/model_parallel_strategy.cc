// ModelParallelStrategy (Lightning 2.4's): tensor parallelism inside data
// parallelism, over a mesh of data_parallel_size x tensor_parallel_size
// ranks. Rank r is tensor-parallel rank r % tp of data-parallel rank r / tp,
// so a tensor-parallel group is consecutive ranks: inside a node whenever
// tp divides the devices per node, where its all-reduces (two per
// transformer block, each way) use the fast links.
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
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <map>
#include <optional>

#include "bf16_wire.h"
#include "bucket_allreduce.h"
#include "distributed_strategy.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/strategies/strategy.h"
#include "trainer_part_param.h"

namespace hpu::core {
namespace {

// A comm process group as the ops' tensor-parallel group.
class CommParallelGroup final : public ops::ParallelGroup {
 public:
  explicit CommParallelGroup(std::unique_ptr<comm::ProcessGroup> group) : group_(std::move(group)) {}
  int rank() const override { return group_->rank(); }
  int size() const override { return group_->size(); }
  comm::ProcessGroup& comm() { return *group_; }

  void allreduce(float* data, std::size_t count, DType wire, ops::ParallelReduce op) override {
    const comm::AllreduceOptions o{.op = op == ops::ParallelReduce::kMax ? comm::ReduceOp::kMax : comm::ReduceOp::kSum};
    const std::span<float> values(data, count);
    if (wire != DType::kBFloat16) return group_->allreduce(values, o);
    std::vector<std::uint16_t> bits;
    wire::toBits(values, bits);
    group_->allreduce(wire::bitsView(bits, count), o);
    wire::fromBits(bits, values);
  }

  void allgather(const float* in, std::size_t count, DType wire, float* out) override {
    const std::span<const float> mine(in, count);
    const std::span<float> all(out, count * static_cast<std::size_t>(size()));
    if (wire != DType::kBFloat16) return group_->allgather(mine, all);
    std::vector<std::uint16_t> bits_in, bits_out(out != nullptr ? all.size() : 0);
    wire::toBits(mine, bits_in);
    group_->allgather(wire::bitsView(bits_in, count), wire::bitsView(bits_out, all.size()));
    wire::fromBits(bits_out, all);
  }

  void reduceScatter(const float* in, std::size_t count, DType wire, float* out) override {
    const std::span<const float> all(in, count * static_cast<std::size_t>(size()));
    const std::span<float> mine(out, count);
    if (wire != DType::kBFloat16) return group_->reduceScatter(all, mine, comm::ReduceOp::kSum);
    std::vector<std::uint16_t> bits_in, bits_out(out != nullptr ? count : 0);
    wire::toBits(all, bits_in);
    group_->reduceScatter(wire::bitsView(bits_in, all.size()), wire::bitsView(bits_out, count), comm::ReduceOp::kSum);
    wire::fromBits(bits_out, mine);
  }

  ops::ParallelGroup& subgroupOf(int count) override {
    auto& sub = subgroups_[count];
    if (!sub) {
      HPU_CHECK(count > 0 && size() % count == 0, "subgroupOf({}) of a group of {}", count, size());
      std::vector<int> ranks;
      for (int r = rank() / count * count; r < (rank() / count + 1) * count; ++r) ranks.push_back(r);
      sub = std::make_unique<CommParallelGroup>(group_->split(ranks));
    }
    return *sub;
  }

  void observe(const std::shared_ptr<comm::CollectiveObserver>& observer) {
    group_->setObserver(observer);
    for (auto& [count, sub] : subgroups_) sub->observe(observer);
  }

 private:
  std::unique_ptr<comm::ProcessGroup> group_;
  std::map<int, std::unique_ptr<CommParallelGroup>> subgroups_;  // made from group_, destroyed before it
};

class ModelParallelStrategy final : public DistributedStrategy {
 public:
  // Sizes unset: "auto" (Lightning's rule: data_parallel_size = nodes,
  // tensor_parallel_size = devices per node).
  ModelParallelStrategy(std::optional<int> data_parallel_size, std::optional<int> tensor_parallel_size,
                        bool save_distributed_checkpoint, bool sequence_parallel, std::string cluster_environment)
      : DistributedStrategy(std::move(cluster_environment)),
        dp_(data_parallel_size),
        tp_(tensor_parallel_size),
        save_distributed_(save_distributed_checkpoint),
        sequence_parallel_(sequence_parallel) {}
  ~ModelParallelStrategy() override { releaseSubgroups(); }

  std::string name() const override { return "ModelParallelStrategy"; }

  void setup(const RunEnvironment& run, device::Platform& platform) override {
    const int world = run.devices_per_node * run.num_nodes;
    const int dp = dp_.value_or(run.num_nodes), tp = tp_.value_or(run.devices_per_node);
    // Checked before any worker starts: one message, from the launching process.
    if (dp * tp != world)
      throw UsageError(fmt::format("trainer.strategy: the sizes data_parallel_size={} and tensor_parallel_size={} "
                                   "multiplied should equal the world size ({} = trainer.devices {} x "
                                   "trainer.num_nodes {})",
                                   dp, tp, world, run.devices_per_node, run.num_nodes));
    DistributedStrategy::setup(run, platform);
    dp_size_ = dp;
    const int r = globalRank(), first = r / tp * tp;
    std::vector<int> tp_ranks, dp_ranks;
    for (int k = 0; k < tp; ++k) tp_ranks.push_back(first + k);
    for (int k = 0; k < dp; ++k) dp_ranks.push_back(k * tp + r % tp);
    tensor_ = std::make_unique<CommParallelGroup>(group().split(tp_ranks));
    data_ = group().split(dp_ranks);
    if (isGlobalZero())
      spdlog::info("{}: {} data-parallel x {} tensor-parallel ranks (tensor-parallel groups of consecutive ranks)",
                   name(), dp, tp);
  }

  ops::ParallelGroup* tensorParallelGroup() override { return tensor_.get(); }
  bool savesDistributedCheckpoint() const override { return save_distributed_; }
  bool sequenceParallel() const override { return sequence_parallel_ && tensor_->size() > 1; }

  std::vector<float> wholeOf(std::span<const float> piece, const Shard& shard, const Shape& local) override {
    if (!shard.split()) return {piece.begin(), piece.end()};
    const int ranks = tensor_->size();
    std::vector<float> pieces(piece.size() * static_cast<std::size_t>(ranks));
    tensor_->allgather(piece.data(), piece.size(), DType::kFloat32, pieces.data());
    std::vector<float> whole(static_cast<std::size_t>(shard.fullShape(local).numel()));
    for (int k = 0; k < ranks; ++k)
      shard.ofRank(k, ranks).place(local, std::span<const float>(pieces).subspan(k * piece.size(), piece.size()), whole);
    return whole;
  }

  void setupParameters(nn::Module&, nn::FlatParameters& params, const std::vector<nn::NamedTensor>& buffers) override {
    broadcastParameters(params, buffers, data_.get());
    sync_.setup(params);
  }

  void beforeBackward(nn::FlatParameters& params, MicroBatch m) override { sync_.beforeBackward(*data_, params, m); }
  void afterBackward(nn::FlatParameters& params, MicroBatch m) override { sync_.afterBackward(*data_, params, m); }

  optim::GradientView gradients(nn::FlatParameters& params) override {
    optim::GradientView v;
    const double ranks = tensor_->size();
    for (auto& b : params.buckets()) {
      const std::span<float> grads = b.gradSpan();
      for (std::size_t j = 0; j < b.members.size(); ++j) {
        const nn::NamedTensor& m = b.members[j];
        v.spans.push_back(grads.subspan(static_cast<std::size_t>(b.offsets[j]), static_cast<std::size_t>(m.tensor.numel())));
        // A piece held by ranks / parts ranks counts parts / ranks on each.
        v.weights.push_back((m.shard.split() ? m.shard.parts : 1) / ranks);
      }
    }
    v.total = [this](double partial) {
      float value = static_cast<float>(partial);
      tensor_->allreduce(&value, 1, DType::kFloat32, ops::ParallelReduce::kSum);
      return static_cast<double>(value);
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
    if (data_) data_->setObserver(observer);
  }

  int teardown(bool failed) override {
    releaseSubgroups();
    return DistributedStrategy::teardown(failed);
  }

 private:
  // Subgroups go before the group they were split from.
  void releaseSubgroups() {
    tensor_.reset();
    data_.reset();
  }

  std::optional<int> dp_, tp_;
  bool save_distributed_, sequence_parallel_;
  int dp_size_ = 1;
  std::unique_ptr<CommParallelGroup> tensor_;
  std::unique_ptr<comm::ProcessGroup> data_;
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
           "", true}}},
        "Tensor parallelism inside data parallelism (Llama, GPT-2: attention heads, MLP and vocabulary split "
        "across the tensor-parallel ranks).",
        {}},
    [](const config::Params& p) {
      return std::make_unique<ModelParallelStrategy>(sizeOf(p, "data_parallel_size"), sizeOf(p, "tensor_parallel_size"),
                                                     p.getBool("save_distributed_checkpoint"),
                                                     p.getBool("sequence_parallel"), "");
    });

}  // namespace

std::unique_ptr<Strategy> makeModelParallelStrategy(std::optional<int> data_parallel_size,
                                                    std::optional<int> tensor_parallel_size,
                                                    bool save_distributed_checkpoint) {
  return std::make_unique<ModelParallelStrategy>(data_parallel_size, tensor_parallel_size, save_distributed_checkpoint,
                                                 /*sequence_parallel=*/false, "");
}

std::unique_ptr<ops::ParallelGroup> makeTensorParallelGroup(std::unique_ptr<comm::ProcessGroup> group) {
  return std::make_unique<CommParallelGroup>(std::move(group));
}

}  // namespace hpu::core
