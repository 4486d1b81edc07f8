// HPUParallelStrategy (hpu_parallel): data-parallel training, one process
// per device, as DDP.
//  - The job: the cluster environment resolves this process's place; with
//    trainer.devices = N and nothing else starting processes, this process is
//    local rank 0 and launches local ranks 1..N-1; every rank joins the
//    ZeroMQ rendezvous (comm/rendezvous.h).
//  - Parameters: rank 0's values are broadcast at setup, buffers too.
//  - Gradients: each bucket is all-reduced (mean) as soon as its last
//    gradient is final in backward, overlapping the rest of backward;
//    gradient-accumulation steps that do not step the optimizer skip it
//    (no_sync).
//  - Data: one seeded permutation per epoch split across ranks.
//  - Metrics: epoch means are combined from every rank's sums.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <cstring>

#include "hpu/comm/cluster_environment.h"
#include "hpu/comm/errors.h"
#include "hpu/comm/launcher.h"
#include "hpu/comm/rendezvous.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/errors.h"
#include "hpu/core/trainer/strategy.h"

namespace hpu::core {
namespace {

comm::EnvMap commEnv(const std::map<std::string, std::string>& env) { return comm::EnvMap(env.begin(), env.end()); }

class ParallelStrategy final : public Strategy {
 public:
  ParallelStrategy(std::int64_t bucket_cap_bytes, std::string cluster_environment)
      : bucket_cap_bytes_(bucket_cap_bytes), environment_(std::move(cluster_environment)) {}
  ~ParallelStrategy() override { teardown(true); }

  std::string name() const override { return "HPUParallelStrategy"; }

  void setup(const RunEnvironment& run, device::Platform& platform) override {
    comm::EnvMap env = commEnv(run.env);
    const comm::Topology topology{run.devices_per_node, run.num_nodes};
    cluster_ = resolve(env, topology);
    if (!cluster_.createsProcessesExternally && cluster_.localWorldSize > 1) {
      comm::LaunchOptions lo;
      lo.cluster = cluster_;
      lo.env = env;
      lo.argv = run.argv;
      lo.onWorkerFailure = [this](const comm::WorkerFailure& f) {
        if (group_) group_->abort("local worker failed: " + f.description);
      };
      launcher_ = comm::launchLocalWorkers(lo);
      env = launcher_->sharedEnv();
      cluster_ = resolve(env, topology);
    }
    platform.requireDevices(cluster_.localWorldSize);
    device_ = &platform.device(cluster_.localRank);
    comm::JoinOptions jo;
    jo.cluster = cluster_;
    jo.settings = comm::commSettingsFromEnv(env);
    jo.token = comm::JobToken::fromEnv(env);
    jo.version = run.version;
    jo.config.entries = run.config_entries;
    // Every log line of a distributed run names its rank.
    spdlog::set_pattern(fmt::format("[rank {}] %^%l%$: %v", cluster_.globalRank));
    group_ = comm::joinProcessGroup(jo);
    if (isGlobalZero())
      spdlog::info("{}: {} processes on {} node(s) joined ({} via {})", name(), cluster_.worldSize, cluster_.numNodes,
                   cluster_.masterAddr + ":" + std::to_string(cluster_.masterPort), cluster_.environment);
  }
  device::Device& device() override { return *device_; }

  int worldSize() const override { return cluster_.worldSize; }
  int globalRank() const override { return cluster_.globalRank; }
  int localRank() const override { return cluster_.localRank; }
  int localWorldSize() const override { return cluster_.localWorldSize; }
  std::int64_t bucketCapBytes() const override { return bucket_cap_bytes_; }

  void setupParameters(nn::FlatParameters& params, const std::vector<nn::NamedTensor>& buffers) override {
    for (auto& b : params.buckets()) group_->broadcast(b.valueSpan(), 0);
    for (const auto& b : buffers)
      if (b.tensor.dtype() == DType::kFloat32) group_->broadcast(Tensor(b.tensor).values(), 0);
    pending_.assign(params.buckets().size(), comm::Work());
    launched_.assign(params.buckets().size(), false);
  }

  void beforeBackward(nn::FlatParameters& params, bool sync) override {
    std::fill(launched_.begin(), launched_.end(), false);
    if (!sync) {
      params.setBucketReadyCallback(nullptr);
      return;
    }
    params.setBucketReadyCallback([this, &params](std::size_t i) { launch(params, i); });
  }

  void afterBackward(nn::FlatParameters& params) override {
    // Buckets whose parameters got no gradient this step (zero-filled by the
    // Trainer) were never reported ready: reduce them now, in bucket order.
    for (std::size_t i = 0; i < params.buckets().size(); ++i)
      if (!launched_[i]) launch(params, i);
    for (auto& w : pending_) w.wait(comm::Work::Clock::time_point::max());
    params.setBucketReadyCallback(nullptr);
  }

  data::SamplerOptions samplerFor(data::SamplerOptions base) const override {
    base.num_replicas = cluster_.worldSize;
    base.rank = cluster_.globalRank;
    return base;
  }

  void allReduceSum(std::span<double> values) override {
    // Every rank's doubles, gathered as bytes and summed in rank order, so
    // every rank gets the same bits.
    const std::size_t bytes = values.size() * sizeof(double);
    std::vector<std::byte> mine(bytes), all(bytes * static_cast<std::size_t>(worldSize()));
    std::memcpy(mine.data(), values.data(), bytes);
    group_->allgather(comm::ConstBufferView(std::span<const std::byte>(mine)), comm::BufferView(std::span<std::byte>(all)));
    for (std::size_t i = 0; i < values.size(); ++i) {
      double s = 0;
      for (int r = 0; r < worldSize(); ++r) {
        double v;
        std::memcpy(&v, all.data() + static_cast<std::size_t>(r) * bytes + i * sizeof(double), sizeof(double));
        s += v;
      }
      values[i] = s;
    }
  }

  void barrier(const std::string& name) override { group_->barrier(name); }

  std::string broadcast(const std::string& text, int root) override {
    std::uint64_t size = text.size();
    group_->broadcast(std::span<std::byte>(reinterpret_cast<std::byte*>(&size), sizeof size), root);
    std::string out = text;
    out.resize(size);
    group_->broadcast(std::span<std::byte>(reinterpret_cast<std::byte*>(out.data()), out.size()), root);
    return out;
  }

  // A worker's failure, when it came first, is the job's exit code.
  int teardown(bool failed) override {
    int code = failed ? 1 : 0;
    if (group_ && failed) group_->abort("rank " + std::to_string(cluster_.globalRank) + " failed");
    group_.reset();
    if (launcher_) {
      if (auto first = launcher_->firstFailure()) code = first->exitCode;
      // After a failure the workers stop at their next collective (peer lost);
      // the launcher's destructor kills what remains past the deadline.
      const auto deadline = comm::LocalLauncher::Clock::now() + (failed ? std::chrono::seconds(30) : std::chrono::minutes(10));
      try {
        const int workers = launcher_->waitWorkers(deadline);
        if (code == 0) code = workers;
      } catch (const comm::CommError& e) {
        spdlog::error("{}", e.what());
        if (code == 0) code = 1;
      }
      launcher_.reset();
    }
    return code;
  }

 private:
  comm::ClusterInfo resolve(const comm::EnvMap& env, const comm::Topology& topology) const {
    if (environment_.empty()) return comm::resolveClusterInfo(env, topology);
    for (const auto& f : comm::clusterEnvironments())
      if (f.name == environment_) return f.make()->resolve(env, topology);
    throw UsageError("unknown cluster environment " + environment_);
  }

  void launch(nn::FlatParameters& params, std::size_t i) {
    launched_[i] = true;
    pending_[i] = group_->allreduceAsync(params.buckets()[i].gradSpan(), comm::ReduceOp::kAvg);
  }

  std::int64_t bucket_cap_bytes_;
  std::string environment_;
  comm::ClusterInfo cluster_;
  std::unique_ptr<comm::LocalLauncher> launcher_;
  std::unique_ptr<comm::ProcessGroup> group_;
  device::Device* device_ = nullptr;
  std::vector<comm::Work> pending_;
  std::vector<bool> launched_;
};

config::Type strategyEnvType() {
  return config::Type::optional(config::Type::string(
      {"LightningEnvironment", "SLURMEnvironment", "MPIEnvironment", "TorchElasticEnvironment"}));
}

HPU_REGISTER_COMPONENT(
    Strategy,
    config::ComponentSchema{
        config::ComponentKind::kStrategy,
        "HPUParallelStrategy",
        {"lightning_habana.pytorch.strategies.HPUParallelStrategy",
         "lightning_habana.pytorch.strategies.parallel.HPUParallelStrategy", "lightning_habana.HPUParallelStrategy"},
        {"HPUParallelStrategy",
         "",
         {{"bucket_cap_mb", config::Type::real().min(0.0, true), "25.0", "Gradient bucket size (MiB) for all-reduce."},
          {"find_unused_parameters", config::Type::boolean(), "false",
           "Parameters without a gradient in a step are found every step (they get zeros), whatever this says."},
          {"cluster_environment", strategyEnvType(), "null",
           "Force a cluster environment instead of detecting it (see trainer.plugins too)."},
          {"process_group_backend", config::Type::string({"hccl"}), "hccl", "Collective backend.", true}}},
        "Data-parallel training over processes and nodes (strategy: hpu_parallel)."},
    [](const config::Params& p) {
      return makeParallelStrategy(static_cast<std::int64_t>(p.getFloat("bucket_cap_mb") * 1024 * 1024),
                                  p.has("cluster_environment") ? p.getString("cluster_environment") : "");
    });

// Cluster environments named in trainer.plugins force that environment.
struct ClusterEnvironmentChoice {};
config::ComponentSchema environmentSchema(const char* name, std::vector<std::string> aliases, const char* doc) {
  return config::ComponentSchema{config::ComponentKind::kClusterEnvironment, name, std::move(aliases), {name, "", {}}, doc};
}
HPU_REGISTER_COMPONENT(ClusterEnvironmentChoice,
                       environmentSchema("LightningEnvironment",
                                         {"lightning.pytorch.plugins.environments.LightningEnvironment",
                                          "pytorch_lightning.plugins.environments.LightningEnvironment"},
                                         "MASTER_ADDR, MASTER_PORT, NODE_RANK (GROUP_RANK), WORLD_SIZE, LOCAL_RANK."),
                       [](const config::Params&) { return std::make_unique<ClusterEnvironmentChoice>(); });
HPU_REGISTER_COMPONENT(ClusterEnvironmentChoice,
                       environmentSchema("SLURMEnvironment",
                                         {"lightning.pytorch.plugins.environments.SLURMEnvironment",
                                          "pytorch_lightning.plugins.environments.SLURMEnvironment"},
                                         "srun: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, SLURM_JOB_NODELIST."),
                       [](const config::Params&) { return std::make_unique<ClusterEnvironmentChoice>(); });
HPU_REGISTER_COMPONENT(ClusterEnvironmentChoice,
                       environmentSchema("MPIEnvironment",
                                         {"lightning.pytorch.plugins.environments.MPIEnvironment",
                                          "pytorch_lightning.plugins.environments.MPIEnvironment"},
                                         "mpirun: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK."),
                       [](const config::Params&) { return std::make_unique<ClusterEnvironmentChoice>(); });
HPU_REGISTER_COMPONENT(ClusterEnvironmentChoice,
                       environmentSchema("TorchElasticEnvironment",
                                         {"lightning.pytorch.plugins.environments.TorchElasticEnvironment",
                                          "pytorch_lightning.plugins.environments.TorchElasticEnvironment"},
                                         "torchrun: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE."),
                       [](const config::Params&) { return std::make_unique<ClusterEnvironmentChoice>(); });

}  // namespace

std::unique_ptr<Strategy> makeParallelStrategy(std::int64_t bucket_cap_bytes, const std::string& cluster_environment) {
  return std::make_unique<ParallelStrategy>(bucket_cap_bytes, cluster_environment);
}

}  // namespace hpu::core
