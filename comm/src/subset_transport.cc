#include "subset_transport.h"

#include <algorithm>

#include "check.h"

namespace hpu::comm::detail {

SubsetTransport::SubsetTransport(Transport& parent, std::vector<int> ranks)
    : parent_(parent), ranks_(std::move(ranks)) {
  const auto self = std::lower_bound(ranks_.begin(), ranks_.end(), parent_.rank());
  HPU_COMM_CHECK(self != ranks_.end() && *self == parent_.rank(), "a subgroup must contain the rank that makes it");
  rank_ = static_cast<int>(self - ranks_.begin());
}

void SubsetTransport::send(int peer, std::span<const std::byte> header, std::span<const std::byte> payload,
                           Deadline deadline) {
  parent_.send(parentRank(peer), header, payload, deadline);
}

std::unique_ptr<Message> SubsetTransport::recv(int peer, Deadline deadline) {
  return parent_.recv(parentRank(peer), deadline);
}

int SubsetTransport::parentRank(int rank) const {
  HPU_COMM_CHECK(rank >= 0 && rank < size(), "a peer outside the subgroup");
  return ranks_[static_cast<std::size_t>(rank)];
}

}  // namespace hpu::comm::detail
