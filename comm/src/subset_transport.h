// A subgroup's view of its parent group's transport (ProcessGroup::split):
// rank r of the view is rank ranks[r] of the parent. Messages pass through
// the parent's transport unchanged; the execution lane the groups share keeps
// them from interleaving with another group's. Aborts, activity, health and
// dropped connections are the parent's: the job's ranks are lost or alive
// for every group alike.
// Thread-safety: as Transport.
#pragma once

#include <vector>

#include "hpu/comm/transport.h"

namespace hpu::comm::detail {

class SubsetTransport final : public Transport {
 public:
  // REQUIRES: `ranks` ascending, ranks of `parent`, parent.rank() among
  // them; `parent` outlives this view.
  SubsetTransport(Transport& parent, std::vector<int> ranks);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(ranks_.size()); }
  int node(int rank) const override { return parent_.node(parentRank(rank)); }
  void send(int peer, std::span<const std::byte> header, std::span<const std::byte> payload,
            Deadline deadline) override;
  bool post(int peer, std::span<const std::byte> header, std::span<const std::byte> payload,
            Deadline deadline) override {
    return parent_.post(parentRank(peer), header, payload, deadline);
  }
  void flushSends(Deadline deadline) override { parent_.flushSends(deadline); }
  void ownPosted() override { parent_.ownPosted(); }
  std::unique_ptr<Message> recv(int peer, Deadline deadline) override;
  void expect(int peer, std::size_t headerBytes, std::span<std::byte> destination) override {
    parent_.expect(parentRank(peer), headerBytes, destination);
  }
  void forgetExpectations() override { parent_.forgetExpectations(); }
  void abort(std::string_view reason) override { parent_.abort(reason); }
  void setActivity(std::string_view activity) override { parent_.setActivity(activity); }
  void checkHealth() const override { parent_.checkHealth(); }
  void dropConnectionsForTesting() override { parent_.dropConnectionsForTesting(); }

 private:
  // REQUIRES: 0 <= rank < size().
  int parentRank(int rank) const;

  Transport& parent_;
  const std::vector<int> ranks_;
  int rank_ = 0;
};

}  // namespace hpu::comm::detail
