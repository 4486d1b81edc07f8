// The job mechanics every multi-process strategy shares: resolving this
// process's place from the cluster environment, launching the local ranks
// (trainer.devices = N and nothing else starting processes), joining the
// ZeroMQ rendezvous, the distributed sampler split, cross-rank metric sums,
// barriers and broadcasts, and the teardown that propagates a worker's
// failure. Subclasses decide how gradients and parameters are synchronised.
#pragma once

#include <memory>
#include <string>

#include "hpu/comm/cluster_info.h"
#include "hpu/comm/launcher.h"
#include "hpu/comm/process_group.h"
#include "hpu/core/strategies/strategy.h"

namespace hpu::core {

// Every rank of `group`'s `values`, combined in rank order: values[i] =
// combine over r of rank r's values[i]. Every rank gets the same bits.
void allReduceInRankOrder(comm::ProcessGroup& group, std::span<double> values, double (*combine)(double, double));
double sumOf(double a, double b);

class DistributedStrategy : public Strategy {
 public:
  // An empty `cluster_environment` detects it from the environment.
  explicit DistributedStrategy(std::string cluster_environment) : environment_(std::move(cluster_environment)) {}
  ~DistributedStrategy() override;

  void setup(const RunEnvironment& run, device::Platform& platform) override;
  device::Device& device() override { return *device_; }
  int worldSize() const override { return cluster_.worldSize; }
  int globalRank() const override { return cluster_.globalRank; }
  int localRank() const override { return cluster_.localRank; }
  int localWorldSize() const override { return cluster_.localWorldSize; }

  data::SamplerOptions samplerFor(data::SamplerOptions base) const override;
  void allReduceSum(std::span<double> values) override;
  void allReduceMax(std::span<double> values) override;
  void barrier(const std::string& name) override;
  std::string broadcast(const std::string& text, int root) override;
  std::vector<std::string> gatherText(const std::string& text) override;
  // A worker's failure, when it came first, is the job's exit code.
  int teardown(bool failed) override;
  std::vector<comm::WorkerExit> workerExits() const override { return worker_exits_; }
  void observeCollectives(std::shared_ptr<comm::CollectiveObserver> observer) override {
    if (group_) group_->setObserver(std::move(observer));
  }
  comm::ScheduleCheck checkCollectiveSchedules() override;
  void postText(const std::string& topic, const std::string& text) override;
  std::string readText(const std::string& topic, int rank) override;

 protected:
  // Rank 0's parameter values and float buffers (with frozen parameters)
  // on every rank of `group` (null: the job's); bucket i from rank 0 of
  // bucket_groups[i] instead where that is given and not null, and frozen
  // experts from rank 0 of `expert_group` (expert parallelism's experts).
  void broadcastParameters(nn::FlatParameters& params, const std::vector<nn::NamedTensor>& buffers,
                           comm::ProcessGroup* group = nullptr, const std::vector<comm::ProcessGroup*>& bucket_groups = {},
                           comm::ProcessGroup* expert_group = nullptr);
  comm::ProcessGroup& group() { return *group_; }

 private:
  comm::ClusterInfo resolve(const Environment& env, const comm::Topology& topology) const;
  // RunEnvironment::simulated_rank: this rank of the job, traced alone.
  void setupSimulated(const RunEnvironment& run, device::Platform& platform);

  std::string environment_;
  comm::ClusterInfo cluster_;
  std::unique_ptr<comm::LocalLauncher> launcher_;
  std::vector<comm::WorkerExit> worker_exits_;  // kept from launcher_ at teardown
  std::unique_ptr<comm::ProcessGroup> group_;
  std::chrono::milliseconds collective_timeout_{0};  // HPU_COLLECTIVE_TIMEOUT
  device::Device* device_ = nullptr;
};

}  // namespace hpu::core
