#include "node_layout.h"

#include <map>

#include "../check.h"

namespace hpu::comm::detail {

NodeLayout::NodeLayout(const std::vector<int>& nodeOf) : node_(nodeOf.size()), local_(nodeOf.size()) {
  std::map<int, int> indexOfId;
  for (std::size_t r = 0; r < nodeOf.size(); ++r) {
    const auto [at, added] = indexOfId.emplace(nodeOf[r], static_cast<int>(members_.size()));
    if (added) members_.emplace_back();
    auto& node = members_[static_cast<std::size_t>(at->second)];
    node_[r] = at->second;
    local_[r] = static_cast<int>(node.size());
    node.push_back(static_cast<int>(r));
  }
  for (const auto& node : members_) regular_ = regular_ && node.size() == members_.front().size();
}

bool NodeLayout::hierarchical() const { return regular_ && members_.size() > 1 && members_.front().size() > 1; }

std::vector<int> NodeLayout::acrossNodes(int local) const {
  HPU_COMM_CHECK(regular_, "ranks across nodes need the same number of ranks on every node");
  std::vector<int> ranks;
  for (const auto& node : members_) ranks.push_back(node[static_cast<std::size_t>(local)]);
  return ranks;
}

}  // namespace hpu::comm::detail
