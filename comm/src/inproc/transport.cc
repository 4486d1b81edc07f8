// In-memory transport: one FIFO per ordered pair of ranks, guarded by one
// mutex per world. A rank that aborts (or whose group is destroyed) is marked
// down, and every rank waiting on anything fails with PeerLostError.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/fmt/fmt.h>

#include "../check.h"
#include "hpu/comm/errors.h"
#include "hpu/comm/in_memory.h"

namespace hpu::comm {
namespace {

class VectorMessage final : public Message {
 public:
  explicit VectorMessage(std::vector<std::byte> bytes) : bytes_(std::move(bytes)) {}
  std::span<const std::byte> bytes() const override { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

struct PeerDown {
  int rank;
  std::string reason;
};

class World {
 public:
  explicit World(int size) : size_(size), queues_(static_cast<std::size_t>(size * size)) {}

  void push(int from, int to, std::vector<std::byte> message) {
    {
      std::lock_guard lock(mutex_);
      queue(from, to).push_back(std::move(message));
    }
    changed_.notify_all();
  }

  std::vector<std::byte> pop(int from, int to, Transport::Deadline deadline) {
    std::unique_lock lock(mutex_);
    auto& q = queue(from, to);
    for (;;) {
      if (!q.empty()) {
        auto message = std::move(q.front());
        q.pop_front();
        return message;
      }
      throwIfDown();
      if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && q.empty()) {
        throwIfDown();
        throw CommTimeoutError(fmt::format("no message from rank {} before the deadline", from));
      }
    }
  }

  void markDown(int rank, std::string reason) {
    {
      std::lock_guard lock(mutex_);
      if (!down_) down_ = PeerDown{rank, std::move(reason)};
    }
    changed_.notify_all();
  }

  void checkHealthy() {
    std::lock_guard lock(mutex_);
    throwIfDown();
  }

 private:
  std::deque<std::vector<std::byte>>& queue(int from, int to) {
    return queues_[static_cast<std::size_t>(from * size_ + to)];
  }
  void throwIfDown() const {
    if (down_) throw PeerLostError(down_->rank, down_->reason);
  }

  const int size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::deque<std::vector<std::byte>>> queues_;
  std::optional<PeerDown> down_;
};

class InMemoryTransport final : public Transport {
 public:
  InMemoryTransport(std::shared_ptr<World> world, int rank, int size, int ranksPerNode)
      : world_(std::move(world)), rank_(rank), size_(size), ranksPerNode_(ranksPerNode) {}
  ~InMemoryTransport() override { world_->markDown(rank_, fmt::format("rank {} left the job", rank_)); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int node(int rank) const override { return rank / ranksPerNode_; }

  void send(int peer, std::span<const std::byte> header, std::span<const std::byte> payload,
            Deadline) override {
    HPU_COMM_CHECK(peer >= 0 && peer < size_ && peer != rank_, "send to an invalid peer");
    world_->checkHealthy();
    std::vector<std::byte> message(header.size() + payload.size());
    std::copy(header.begin(), header.end(), message.begin());
    std::copy(payload.begin(), payload.end(), message.begin() + static_cast<std::ptrdiff_t>(header.size()));
    world_->push(rank_, peer, std::move(message));
  }

  std::unique_ptr<Message> recv(int peer, Deadline deadline) override {
    HPU_COMM_CHECK(peer >= 0 && peer < size_ && peer != rank_, "recv from an invalid peer");
    return std::make_unique<VectorMessage>(world_->pop(peer, rank_, deadline));
  }

  void abort(std::string_view reason) override {
    world_->markDown(rank_, fmt::format("rank {} aborted: {}", rank_, reason));
  }

  void setActivity(std::string_view) override {}

 private:
  std::shared_ptr<World> world_;
  const int rank_;
  const int size_;
  const int ranksPerNode_;
};

}  // namespace

std::vector<std::unique_ptr<ProcessGroup>> makeInMemoryProcessGroups(int worldSize, ProcessGroupOptions options,
                                                                     int ranksPerNode) {
  HPU_COMM_CHECK(worldSize >= 1, "a world has at least one rank");
  HPU_COMM_CHECK(ranksPerNode >= 1, "a node has at least one rank");
  auto world = std::make_shared<World>(worldSize);
  auto store = makeInMemoryStore();
  std::vector<std::unique_ptr<ProcessGroup>> groups;
  for (int r = 0; r < worldSize; ++r) {
    groups.push_back(std::make_unique<ProcessGroup>(
        std::make_unique<InMemoryTransport>(world, r, worldSize, ranksPerNode), store, options));
  }
  return groups;
}

}  // namespace hpu::comm
