#include "distributed_strategy.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "hpu/comm/cluster_environment.h"
#include "hpu/comm/errors.h"
#include "hpu/comm/rendezvous.h"
#include "hpu/comm/simulated.h"
#include "hpu/core/base/errors.h"

namespace hpu::core {

DistributedStrategy::~DistributedStrategy() { teardown(true); }

comm::ClusterInfo DistributedStrategy::resolve(const Environment& env, const comm::Topology& topology) const {
  if (environment_.empty()) return comm::resolveClusterInfo(env, topology);
  for (const auto& f : comm::clusterEnvironments())
    if (f.name == environment_) return f.make()->resolve(env, topology);
  throw UsageError("unknown cluster environment " + environment_);
}

void DistributedStrategy::setup(const RunEnvironment& run, device::Platform& platform) {
  if (run.simulated_rank >= 0) return setupSimulated(run, platform);
  Environment env = run.env;
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
    lo.workersReportErrors = true;  // this process reports the job's failure (app/failure.h)
    launcher_ = comm::launchLocalWorkers(lo);
    env = launcher_->sharedEnv();
    cluster_ = resolve(env, topology);
  }
  platform.requireDevices(cluster_.localWorldSize);
  device_ = &deviceFor(platform, run, cluster_.localRank);
  comm::JoinOptions jo;
  jo.cluster = cluster_;
  jo.settings = comm::commSettingsFromEnv(env);
  jo.token = comm::JobToken::fromEnv(env);
  jo.version = run.version;
  jo.config.entries = run.config_entries;
  // A dry run: shape-only tensors cross no link, their collectives' schedule is checked.
  jo.settings.group.shapeOnly = device_->shapeOnly();
  collective_timeout_ = jo.settings.group.timeout;
  // Every log line of a distributed run names its rank.
  spdlog::set_pattern(fmt::format("[rank {}] %^%l%$: %v", cluster_.globalRank));
  group_ = comm::joinProcessGroup(jo);
  if (isGlobalZero())
    spdlog::info("{}: {} processes on {} node(s) joined ({}:{} via {})", name(), cluster_.worldSize, cluster_.numNodes,
                 cluster_.masterAddr, cluster_.masterPort, cluster_.environment);
}

void DistributedStrategy::setupSimulated(const RunEnvironment& run, device::Platform& platform) {
  cluster_ = {};
  cluster_.worldSize = run.devices_per_node * run.num_nodes;
  cluster_.globalRank = run.simulated_rank;
  cluster_.localWorldSize = run.devices_per_node;
  cluster_.localRank = run.simulated_rank % run.devices_per_node;
  cluster_.nodeRank = run.simulated_rank / run.devices_per_node;
  cluster_.numNodes = run.num_nodes;
  cluster_.environment = "simulated";
  device_ = &deviceFor(platform, run, cluster_.localRank);
  group_ = comm::makeSimulatedProcessGroup(cluster_.globalRank, cluster_.worldSize, run.devices_per_node);
}

void DistributedStrategy::broadcastParameters(nn::FlatParameters& params, const std::vector<nn::NamedTensor>& buffers,
                                              comm::ProcessGroup* group,
                                              const std::vector<comm::ProcessGroup*>& bucket_groups,
                                              comm::ProcessGroup* expert_group) {
  comm::ProcessGroup& g = group != nullptr ? *group : *group_;
  for (std::size_t i = 0; i < params.buckets().size(); ++i) {
    comm::ProcessGroup* own = i < bucket_groups.size() ? bucket_groups[i] : nullptr;
    (own != nullptr ? *own : g).broadcast(params.buckets()[i].valueSpan(), 0);
  }
  for (const auto& b : buffers)
    if (b.tensor.dtype() == DType::kFloat32)
      (b.expert_parallel > 1 && expert_group != nullptr ? *expert_group : g).broadcast(Tensor(b.tensor).values(), 0);
}

data::SamplerOptions DistributedStrategy::samplerFor(data::SamplerOptions base) const {
  base.num_replicas = cluster_.worldSize;
  base.rank = cluster_.globalRank;
  return base;
}

double sumOf(double a, double b) { return a + b; }

void allReduceInRankOrder(comm::ProcessGroup& group, std::span<double> values, double (*combine)(double, double)) {
  // Every rank's doubles, gathered as bytes and combined in rank order.
  const std::size_t bytes = values.size() * sizeof(double);
  std::vector<std::byte> mine(bytes), all(bytes * static_cast<std::size_t>(group.size()));
  std::memcpy(mine.data(), values.data(), bytes);
  group.allgather(comm::ConstBufferView(std::span<const std::byte>(mine)), comm::BufferView(std::span<std::byte>(all)));
  for (std::size_t i = 0; i < values.size(); ++i)
    for (int r = 0; r < group.size(); ++r) {
      double v;
      std::memcpy(&v, all.data() + static_cast<std::size_t>(r) * bytes + i * sizeof(double), sizeof(double));
      values[i] = r == 0 ? v : combine(values[i], v);
    }
}

void DistributedStrategy::allReduceSum(std::span<double> values) { allReduceInRankOrder(*group_, values, sumOf); }

void DistributedStrategy::allReduceMax(std::span<double> values) {
  allReduceInRankOrder(*group_, values, [](double a, double b) { return std::max(a, b); });
}

void DistributedStrategy::barrier(const std::string& name) { group_->barrier(name); }

std::string DistributedStrategy::broadcast(const std::string& text, int root) {
  std::uint64_t size = text.size();
  group_->broadcast(std::span<std::byte>(reinterpret_cast<std::byte*>(&size), sizeof size), root);
  std::string out = text;
  out.resize(size);
  group_->broadcast(std::span<std::byte>(reinterpret_cast<std::byte*>(out.data()), out.size()), root);
  return out;
}

std::vector<std::string> DistributedStrategy::gatherText(const std::string& text) {
  // Every rank's size (8 bytes from each: linear in the world size), then
  // every text padded to the longest.
  const auto ranks = static_cast<std::size_t>(worldSize());
  const std::uint64_t size = text.size();
  std::vector<std::uint64_t> sizes(ranks);
  group_->allgather(comm::ConstBufferView(std::as_bytes(std::span<const std::uint64_t>(&size, 1))),
                    comm::BufferView(std::as_writable_bytes(std::span<std::uint64_t>(sizes))));
  const auto longest = static_cast<std::size_t>(*std::max_element(sizes.begin(), sizes.end()));
  std::vector<std::byte> mine(longest), all(longest * ranks);
  std::memcpy(mine.data(), text.data(), text.size());
  if (longest > 0)
    group_->allgather(comm::ConstBufferView(std::span<const std::byte>(mine)), comm::BufferView(std::span<std::byte>(all)));
  std::vector<std::string> out;
  for (std::size_t r = 0; r < ranks; ++r)
    out.emplace_back(reinterpret_cast<const char*>(all.data()) + r * longest, static_cast<std::size_t>(sizes[r]));
  return out;
}

comm::ScheduleCheck DistributedStrategy::checkCollectiveSchedules() {
  if (!device_->shapeOnly() || cluster_.environment == "simulated") return {};
  return group_->checkSchedules(comm::ProcessGroup::Clock::now() + collective_timeout_);
}

void DistributedStrategy::postText(const std::string& topic, const std::string& text) {
  group_->store().set(fmt::format("hpu/text/{}/{}", topic, cluster_.globalRank), text,
                      comm::Store::Clock::now() + collective_timeout_);
}

std::string DistributedStrategy::readText(const std::string& topic, int rank) {
  return group_->store().get(fmt::format("hpu/text/{}/{}", topic, rank), comm::Store::Clock::now() + collective_timeout_);
}

int DistributedStrategy::teardown(bool failed) {
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
    worker_exits_ = launcher_->workerExits();
    launcher_.reset();
  }
  return code;
}

}  // namespace hpu::core
