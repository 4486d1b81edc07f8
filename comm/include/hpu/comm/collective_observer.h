// A process group tells an observer of every collective it ran: what it was
// and when it ran, on the thread that ran it (the caller's, or the comm
// thread behind allreduceAsync). Profilers put these on a trace's
// collectives track.
// Thread-safety: onCollective() may be called from any thread, concurrently
// with the observer's owner; implementations synchronise themselves.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "hpu/comm/buffer_view.h"

namespace hpu::comm {

struct CollectiveRecord {
  std::string_view kind;       // "allreduce", "broadcast", "allgather", "reduce_scatter", "barrier", "alltoall"
  std::string description;     // "allreduce #7 (avg, float32, 4097 elements, ring)"
  DType dtype = DType::kFloat32;
  std::uint64_t count = 0;     // elements (the whole buffer for allgather / reduce_scatter, those sent for alltoall)
  std::uint64_t sequence = 0;  // the group's n-th collective
  int groupNodes = 1;          // nodes the group's ranks are on
  int groupSize = 1;           // ranks of the group that ran it: a subgroup's (ProcessGroup::split), or the job's
  bool async = false;          // issued by allreduceAsync (ran on the comm thread unless simulated)
  bool failed = false;
  std::chrono::steady_clock::time_point begin, end;
};

class CollectiveObserver {
 public:
  virtual ~CollectiveObserver() = default;
  virtual void onCollective(const CollectiveRecord& record) = 0;
};

}  // namespace hpu::comm
