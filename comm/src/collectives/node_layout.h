// Which ranks of a job share a node, as the hierarchical collectives see it.
// Nodes are numbered by their lowest rank (rank 0's node is node 0); a rank's
// local index is its position among the ranks of its node, in rank order.
// Thread-safety: immutable after construction.
#pragma once

#include <vector>

namespace hpu::comm::detail {

class NodeLayout {
 public:
  // nodeOf[r]: an id of rank r's node, equal for ranks of the same node.
  explicit NodeLayout(const std::vector<int>& nodeOf);

  int nodes() const { return static_cast<int>(members_.size()); }
  // True when every node holds the same number of ranks, there are several
  // nodes and several ranks per node: the layout hierarchical collectives need
  // and pay off on.
  bool hierarchical() const;
  // Every node holds the same number of ranks.
  bool regular() const { return regular_; }

  int nodeIndex(int rank) const { return node_[static_cast<std::size_t>(rank)]; }
  int localIndex(int rank) const { return local_[static_cast<std::size_t>(rank)]; }
  // The ranks of node `node`, ascending.
  const std::vector<int>& members(int node) const { return members_[static_cast<std::size_t>(node)]; }
  // The rank of local index `local` on every node, in node order.
  // REQUIRES: regular().
  std::vector<int> acrossNodes(int local) const;

 private:
  std::vector<std::vector<int>> members_;
  std::vector<int> node_;   // per rank
  std::vector<int> local_;  // per rank
  bool regular_ = true;
};

}  // namespace hpu::comm::detail
