// A rank of a world traced in one process (`hpu-train estimate`): a process
// group whose collectives move no data. Each one is checked, numbered and
// described to the observer as on a real group, then completes at once, on
// the caller's thread (asynchronous ones too, so an observer sees every
// collective where the caller issued it). Buffers may have no storage.
// Its subgroups (ProcessGroup::split) are simulated too.
// Thread-safety: as ProcessGroup.
#pragma once

#include <memory>

#include "hpu/comm/process_group.h"

namespace hpu::comm {

// Rank `rank` of a world of `worldSize`, `ranksPerNode` to a node (ranks
// r / ranksPerNode share one), as the job would be laid out: its groups
// report the nodes they span. REQUIRES: 0 <= rank < worldSize.
std::unique_ptr<ProcessGroup> makeSimulatedProcessGroup(int rank, int worldSize, int ranksPerNode = 1);

}  // namespace hpu::comm
