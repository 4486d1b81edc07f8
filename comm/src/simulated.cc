#include "hpu/comm/simulated.h"

#include "check.h"
#include "hpu/comm/store.h"

namespace hpu::comm {
namespace {

// A rank's identity and nothing else: a simulated group never sends.
class NoTransport final : public Transport {
 public:
  NoTransport(int rank, int size, int ranks_per_node) : rank_(rank), size_(size), ranks_per_node_(ranks_per_node) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int node(int rank) const override { return rank / ranks_per_node_; }
  void send(int, std::span<const std::byte>, std::span<const std::byte>, Deadline) override {
    HPU_COMM_CHECK(false, "a simulated process group sends no messages");
  }
  std::unique_ptr<Message> recv(int, Deadline) override {
    HPU_COMM_CHECK(false, "a simulated process group receives no messages");
    return nullptr;
  }
  void abort(std::string_view) override {}
  void setActivity(std::string_view) override {}

 private:
  int rank_, size_, ranks_per_node_;
};

}  // namespace

std::unique_ptr<ProcessGroup> makeSimulatedProcessGroup(int rank, int worldSize, int ranksPerNode) {
  HPU_COMM_CHECK(worldSize >= 1 && rank >= 0 && rank < worldSize, "simulated rank must be in [0, worldSize)");
  HPU_COMM_CHECK(ranksPerNode >= 1, "simulated ranks per node must be at least 1");
  ProcessGroupOptions options;
  options.simulated = true;
  return std::make_unique<ProcessGroup>(std::make_unique<NoTransport>(rank, worldSize, ranksPerNode), makeInMemoryStore(), options);
}

}  // namespace hpu::comm
