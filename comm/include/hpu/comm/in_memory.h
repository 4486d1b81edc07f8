// Ranks as threads: process groups whose transport and store live in this
// process's memory. Tests use them to run every collective at every world
// size without sockets; a world of one process uses one as well. Their
// subgroups (ProcessGroup::split) run over the same in-memory transport.
// Thread-safety: each returned group is used like a separate process (one
// thread issuing its collectives); the groups may be destroyed in any order,
// each after the groups split from it.
#pragma once

#include <memory>
#include <vector>

#include "hpu/comm/process_group.h"

namespace hpu::comm {

// `worldSize` groups (rank i at index i) sharing one in-memory store. Ranks
// r / ranksPerNode form a node, as ranks of one node do for the hierarchical
// collectives. REQUIRES: worldSize >= 1, ranksPerNode >= 1.
std::vector<std::unique_ptr<ProcessGroup>> makeInMemoryProcessGroups(int worldSize, ProcessGroupOptions options = {},
                                                                     int ranksPerNode = 1);

}  // namespace hpu::comm
