// A process group: the ranks of one job, or of a subgroup of them, and the
// collectives they run together.
//
// Algorithms (every result is bit-identical on every rank: each element is
// reduced in one fixed order, then copied):
//  - allreduce: recursive doubling below ProcessGroupOptions::ringThresholdBytes
//    (log2 n exchanges; a non-power-of-two world folds its extra ranks in and
//    out); from there up to halvingDoublingMaxBytes, among 4 or more ranks,
//    Rabenseifner's halving-doubling (2 log2 n steps of halving pieces);
//    above, a ring of reduce-scatter + allgather streamed in chunks, so
//    receiving, reducing and forwarding overlap;
//  - reduceScatter / allgather: the two halves of that ring;
//  - broadcast: binomial tree for small buffers, chunked chain for large;
//  - with several nodes of several ranks each (the same number on every
//    node), allreduce, broadcast, allgather and reduceScatter are
//    hierarchical: shared memory inside a node, one ring or tree per local
//    index between nodes, small and large buffers each their own variant
//    (collectives/hierarchical.cc);
//  - alltoall: pairwise exchange, n - 1 steps; at step s a rank sends its
//    block to rank + s and receives from rank - s, each block streamed in
//    chunks, with the sends of the next chunks (and steps) in flight while
//    it receives (collectives/alltoall.cc); the same on every layout, as
//    the transport carries each pair's messages the way it links them;
//  - barrier: every rank reports to rank 0, which releases them all.
// Every message carries kind, op, dtype, count, root and the group's
// sequence number (an alltoall's count is the one pair's block); a rank that
// receives a message of a different collective throws
// CollectiveMismatchError naming both sides instead of reading garbage.
//
// Subgroups (split): tensor, pipeline and data parallelism each run their
// collectives among some of the job's ranks (TP=2 x DP=2 on 4 ranks: TP
// groups {0,1},{2,3}, DP groups {0,2},{1,3}). A group split from this one
// sends through a view of this group's transport and shares its execution
// lane: on each rank, the collectives of a group and of every group split
// from it, directly or not, run one at a time, in the order issued. Each
// group numbers its own collectives and reports to its own observer.
// Contract: the job's collectives, of all its groups, follow one order that
// every rank agrees on, and each rank issues those of its groups in that
// order (the same program on every rank does). Then the messages of two
// groups between a pair of ranks cannot interleave, since each rank sends
// and receives them one collective after another, and no ranks wait on each
// other in a cycle. Ranks that break it wait until their timeouts or fail
// with CollectiveMismatchError; messages do not name their group, so
// collectives of two groups that agree on kind, sizes and sequence number
// are not told apart. A subgroup's errors name this rank and its peers by
// their ranks in the subgroup, a lost rank (PeerLostError::rank() and the
// transport's report of it) by its rank in the job.
//
// Failure: the first error poisons the group and every group sharing its
// lane (every later call rethrows it) and is announced to the other ranks,
// which fail with PeerLostError naming this rank. Every blocking call has a
// deadline (CollectiveOptions::timeout, default HPU_COLLECTIVE_TIMEOUT).
//
// Asynchronous collectives (allreduceAsync) run in submission order on the
// lane's comm thread, whichever group issued them; a synchronous call on any
// group of the lane is ordered after every pending asynchronous one, and
// runs on the caller's thread when nothing is pending.
//
// Thread-safety: all methods may be called from any thread, but the ranks
// must issue collectives in the same order, so a job normally calls them from
// one thread (plus the comm thread behind allreduceAsync).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hpu/comm/buffer_view.h"
#include "hpu/comm/collective_observer.h"
#include "hpu/comm/store.h"
#include "hpu/comm/transport.h"
#include "hpu/comm/work.h"

namespace hpu::comm {

namespace detail {
enum class CollectiveKind : std::uint8_t;
class CollectiveSchedule;
class ExecutionLane;
class NodeLayout;
class NativeCollectives;
}

enum class Algorithm : std::uint8_t {
  kAuto,  // hierarchical across nodes of several ranks; else, at or above ringThresholdBytes, halving-doubling
          // up to halvingDoublingMaxBytes among 4 or more ranks and the ring beyond; below, recursive doubling
  kRing,
  kRecursiveDoubling,
  kHierarchical,  // inside nodes, then between them; flat (by size) when nodes hold different numbers of ranks
  kHalvingDoubling,  // reduce-scatter by recursive halving, allgather by recursive doubling (Rabenseifner)
};

struct ProcessGroupOptions {
  std::chrono::milliseconds timeout{600'000};  // default per-call deadline (HPU_COLLECTIVE_TIMEOUT)
  std::size_t ringThresholdBytes = 64 * 1024;  // allreduce/broadcast switch to their bandwidth algorithm here
  // Allreduces from ringThresholdBytes up to this among 4 or more ranks take
  // halving-doubling: 2 log2(n) steps where the ring takes 2(n - 1). Measured
  // with 4 ranks on 2 cores: 0.7-0.9x the ring's time at 64-256 KiB, over
  // TCP links and shared memory alike, 1.05-1.1x from 1 MiB, where the
  // ring's pipelining wins.
  std::size_t halvingDoublingMaxBytes = 512u << 10;
  // Ring and chain pipelines stream chunks of this size (at least 64 bytes;
  // a step never uses more than 1024 chunks, so huge buffers get larger ones).
  std::size_t chunkBytes = 256 * 1024;
  // No data moves: see simulated.h (makeSimulatedProcessGroup sets it).
  bool simulated = false;
  // A dry run's group on shape-only devices: a collective on a buffer
  // without storage (data null, count > 0) moves no data and completes at
  // once; collectives on buffers with storage (a broadcast seed, a metric)
  // run over the transport as ever. Every collective of the group is
  // recorded for checkSchedules.
  bool shapeOnly = false;
};

// What ProcessGroup::checkSchedules compared.
struct ScheduleCheck {
  int groups = 0;                // this rank's groups checked (the job's and its subgroups)
  std::uint64_t collectives = 0;  // the collectives they issued
};

struct CollectiveOptions {
  std::chrono::milliseconds timeout{0};  // 0: the group's ProcessGroupOptions::timeout
};

struct AllreduceOptions {
  ReduceOp op = ReduceOp::kSum;
  Algorithm algorithm = Algorithm::kAuto;
  std::chrono::milliseconds timeout{0};  // 0: the group's default
};

class ProcessGroup {
 public:
  using Clock = std::chrono::steady_clock;

  // `store` is shared by the ranks of the job (rank 0's over ZeroMQ).
  ProcessGroup(std::unique_ptr<Transport> transport, std::shared_ptr<Store> store, ProcessGroupOptions options);
  // Waits for queued asynchronous work of its lane (each bounded by its
  // timeout); the job's group then stops the comm thread and leaves the job.
  // REQUIRES: the groups split from this one are destroyed.
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  Store& store() { return *store_; }

  // From now on allreduce, broadcast, allgather, reduceScatter, alltoall and
  // barrier move their data through `native` (Open MPI's collectives; see
  // collectives/native.h) instead of the transport. Groups split from this
  // one do not: theirs run this library's algorithms over the transport.
  // REQUIRES: called before the first collective.
  void useNativeCollectives(std::unique_ptr<detail::NativeCollectives> native);
  // "Open MPI 4.1.4" with native collectives, else "" (the transport's algorithms).
  std::string nativeCollectivesName() const;

  // In place: every rank ends with op over all ranks' `data`.
  // REQUIRES: data.dtype is float32 or bfloat16.
  void allreduce(BufferView data, const AllreduceOptions& options = {});
  void allreduce(std::span<float> data, ReduceOp op) { allreduce(BufferView(data), AllreduceOptions{.op = op}); }

  // Every rank ends with `root`'s data. REQUIRES: 0 <= root < size().
  void broadcast(BufferView data, int root, const CollectiveOptions& options = {});

  // Returns once every rank reached the barrier of the same `name`.
  void barrier(std::string_view name, const CollectiveOptions& options = {});

  // output (output.count elements) = concatenation over ranks of `input`,
  // where rank r contributes the block shardRange(output.count, size(), r).
  // REQUIRES: input.count == shard size of this rank, same dtype.
  void allgather(ConstBufferView input, BufferView output, const CollectiveOptions& options = {});

  // output = this rank's block shardRange(input.count, size(), rank()) of
  // op over all ranks' `input`.
  // REQUIRES: output.count == that block's size, same dtype, float32 or bfloat16.
  void reduceScatter(ConstBufferView input, BufferView output, ReduceOp op, const CollectiveOptions& options = {});

  // All-to-all with a block of its own size for every pair of ranks (MPI's
  // Alltoallv): `input` holds size() consecutive blocks, the one for rank d
  // of sendCounts[d] elements; `output` receives size() consecutive blocks,
  // the one from rank s of recvCounts[s] elements (this rank's own block is
  // copied). Nothing is padded: a block of 0 elements costs one empty
  // message. Rank s's sendCounts[d] must equal rank d's recvCounts[s]; a
  // receiver that expects another count than its sender sends throws
  // CollectiveMismatchError naming both ranks and both counts (alltoallCounts
  // tells a receiver its counts). Any dtype, bytes included (int64 indices
  // travel as 8 bytes each).
  // REQUIRES: sendCounts.size() == recvCounts.size() == size(); input.count
  // == sum of sendCounts; output.count == sum of recvCounts; the same dtype;
  // input and output do not overlap.
  void alltoall(ConstBufferView input, std::span<const std::size_t> sendCounts, BufferView output,
                std::span<const std::size_t> recvCounts, const CollectiveOptions& options = {});

  // The receive counts of an alltoall whose send counts are `sendCounts`:
  // element s of the result is rank s's sendCounts[rank()]. One collective
  // of its own (an alltoall of one 8-byte count per pair), for a caller that
  // knows how much it sends but not how much it receives. A simulated group,
  // which moves no data, returns `sendCounts` (every pair as balanced as this
  // rank's sends). REQUIRES: sendCounts.size() == size().
  std::vector<std::size_t> alltoallCounts(std::span<const std::size_t> sendCounts,
                                          const CollectiveOptions& options = {});

  // Queues an allreduce on the comm thread and returns at once; DDP overlaps
  // its bucket allreduces with the backward pass this way.
  // REQUIRES: the buffer stays valid and untouched until wait() returns.
  Work allreduceAsync(BufferView data, const AllreduceOptions& options = {});
  Work allreduceAsync(std::span<float> data, ReduceOp op) {
    return allreduceAsync(BufferView(data), AllreduceOptions{.op = op});
  }

  // Fails this group and tells every other rank (they raise PeerLostError
  // naming this rank with `reason`). Call it when this rank stops for an error
  // of its own, so the others stop at once instead of at their timeouts.
  void abort(std::string_view reason);

  // The balanced partition used by allgather and reduceScatter: rank r owns
  // `size` elements starting at `offset` (the first total % worldSize ranks
  // get one extra).
  struct Range {
    std::size_t offset;
    std::size_t size;
  };
  static Range shardRange(std::size_t total, int worldSize, int rank);

  // Tells `observer` (null: nobody) of every collective of this group that
  // runs from now on; groups split from it or that it was split from have
  // observers of their own. The group keeps it alive while it may call it.
  void setObserver(std::shared_ptr<CollectiveObserver> observer);

  // A group of the listed ranks of this one: its rank r is ranks[r]. It
  // runs over this group's transport and shares its execution lane, its
  // failures and its store (see "Subgroups" above); it numbers its
  // collectives from 0 and has no observer yet. Nothing is sent: only the
  // listed ranks call split, each with the same list. A subgroup of a
  // simulated group is simulated. Throws CommError naming the list when it
  // is not ascending, lists a rank twice or a rank outside this group, or
  // leaves this rank out.
  // REQUIRES: the returned group is destroyed before this one.
  std::unique_ptr<ProcessGroup> split(std::vector<int> ranks);

  // Shape-only groups (ProcessGroupOptions::shapeOnly): checks that the
  // ranks of this group and of every group split from it issued the same
  // collectives since the previous check, in the same order, with the same
  // kinds, sizes, roots and dtypes, through the store
  // (collective_schedule.h). Throws CollectiveMismatchError naming this
  // rank, the group, and the first collective that differs from the group's
  // rank 0's. Groups with the same members are matched by the order their
  // ranks split them. REQUIRES: called on the job's group by every rank,
  // with no collective in flight; the ranks of two groups with the same
  // members split them in the same order.
  ScheduleCheck checkSchedules(Clock::time_point deadline);

 private:
  struct Operation;
  // A group split from `parent` (null: the job's group) running on `lane`.
  ProcessGroup(std::unique_ptr<Transport> transport, std::shared_ptr<Store> store, ProcessGroupOptions options,
               std::shared_ptr<detail::ExecutionLane> lane, ProcessGroup* parent);
  // An operation with its descriptor's kind, dtype and count; timeout 0 means the group's default.
  std::shared_ptr<Operation> makeOperation(detail::CollectiveKind kind, DType dtype, std::uint64_t count,
                                           std::chrono::milliseconds timeout);
  std::shared_ptr<Operation> makeAllreduce(BufferView data, const AllreduceOptions& options);
  void run(std::shared_ptr<Operation> op, bool wait);
  // Runs `op` on the transport unless `error` is set (the lane failed), tells
  // the observer and completes its Work. Returns its error.
  std::exception_ptr execute(Operation& op, std::exception_ptr error);
  // Throws CommError unless `ranks` can make a subgroup of this group (split's contract).
  void checkSubgroupRanks(const std::vector<int>& ranks) const;

  std::unique_ptr<Transport> transport_;
  std::shared_ptr<Store> store_;
  ProcessGroupOptions options_;
  const int rank_;
  const int size_;
  std::unique_ptr<const detail::NodeLayout> layout_;
  std::unique_ptr<detail::NativeCollectives> native_;
  // Runs the collectives of this group, of the groups split from it and of the one it was split from.
  std::shared_ptr<detail::ExecutionLane> lane_;
  ProcessGroup* const parent_;  // the group this one was split from; null for the job's group
  std::atomic<int> liveSubgroups_{0};  // groups split from this one and not destroyed yet
  std::vector<int> members_;  // the job's ranks of this group's ranks

  std::mutex mutex_;  // guards the two below; taken after the lane's lock, never before
  std::uint64_t nextSequence_ = 0;
  std::shared_ptr<CollectiveObserver> observer_;
  std::unique_ptr<detail::CollectiveSchedule> schedule_;  // shape-only groups: since the last check
  std::vector<ProcessGroup*> subgroups_;  // split from this one, alive, in the order they were made
  std::uint64_t checks_ = 0;  // checkSchedules calls so far
};

}  // namespace hpu::comm
