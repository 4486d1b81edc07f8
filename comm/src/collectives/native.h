// Collectives another library runs in place of this library's algorithms
// over the transport: Open MPI's (mpi/mpi_collectives.h), for a job whose
// processes mpirun started. A ProcessGroup given one keeps everything else
// of its own (ordering, sequence numbers, asynchronous work, deadlines,
// failure and observers); only the data moves another way. Every call waits
// through ctx.checkAlive(), which throws when a rank is lost, this rank
// aborted, or the deadline passed. Results follow ProcessGroup's contract
// (the same on every rank); the order of a sum's terms is the library's.
// Thread-safety: used by one thread at a time (the group serialises).
#pragma once

#include <span>
#include <string>

#include "context.h"
#include "hpu/comm/buffer_view.h"

namespace hpu::comm::detail {

class NativeCollectives {
 public:
  virtual ~NativeCollectives() = default;
  // "Open MPI 4.1.4".
  virtual std::string name() const = 0;
  virtual void allreduce(CollectiveContext& ctx, BufferView data, ReduceOp op) = 0;
  virtual void broadcast(CollectiveContext& ctx, BufferView data, int root) = 0;
  // Rank r's block of output is shardRange(output.count, size, r), as ProcessGroup::allgather.
  virtual void allgather(CollectiveContext& ctx, ConstBufferView input, BufferView output) = 0;
  virtual void reduceScatter(CollectiveContext& ctx, ConstBufferView input, BufferView output, ReduceOp op) = 0;
  // Block d of `input` (sendBlocks[d], element ranges) to rank d's block
  // rank() of its output (its recvBlocks[rank()]), as ProcessGroup::alltoall.
  virtual void alltoall(CollectiveContext& ctx, ConstBufferView input, std::span<const Range> sendBlocks,
                        BufferView output, std::span<const Range> recvBlocks) = 0;
  virtual void barrier(CollectiveContext& ctx) = 0;
  // The group failed: leave without the library's orderly shutdown, which
  // would wait for ranks that are gone.
  virtual void abandon() {}
};

}  // namespace hpu::comm::detail
