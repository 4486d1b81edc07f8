// The collective algorithms, each a free function over a CollectiveContext
// (the whole job, or a subgroup of it). They assume the descriptor in the
// context matches the arguments and that the process group has validated
// sizes and dtypes. A kAvg reduction divides by the context's size; the
// hierarchical algorithms run their phases as sums and divide once at the end.
// Thread-safety: run by the one thread that holds the transport.
#pragma once

#include <span>
#include <vector>

#include "context.h"
#include "hpu/comm/buffer_view.h"
#include "node_layout.h"

namespace hpu::comm::detail {

// The element ranges a ring cuts its buffer into, one per rank of the ring.
using Blocks = std::vector<Range>;
// ProcessGroup::shardRange's partition of `count` elements over `n` ranks.
Blocks evenBlocks(std::size_t count, int n);

// Ring allreduce: reduce-scatter then allgather, streamed as one pipeline of
// 2(n-1) steps in chunks. Block b is reduced in ring order starting at rank
// b+1 and ending at its owner b, then copied around: identical on every rank.
void allreduceRing(CollectiveContext& ctx, BufferView data, ReduceOp op);

// Recursive doubling: log2(p) full-buffer exchanges among the largest power
// of two p <= n ranks; ranks p..n-1 first hand their data to rank r-p and get
// the result back at the end. Each pair combines (lower rank's, higher
// rank's), so both hold bit-identical values after every round.
void allreduceRecursiveDoubling(CollectiveContext& ctx, BufferView data, ReduceOp op);

// Rabenseifner's allreduce among the largest power of two p <= n ranks
// (ranks p..n-1 fold in and out as in recursive doubling): log2(p) steps of
// recursive halving, each rank keeping the half of its range that its bit
// of the step names, then log2(p) steps of recursive doubling that gather
// the reduced pieces back. Bandwidth as the ring, in 2 log2(p) steps
// instead of 2(n - 1). Each piece is combined (lower rank's, higher rank's)
// by the one rank that keeps it, then copied: identical on every rank.
void allreduceHalvingDoubling(CollectiveContext& ctx, BufferView data, ReduceOp op);

// The reduce-scatter half of the ring over `blocks` of `input`: output = the
// reduction of block rank(). `output` may be that very block of `input`.
void reduceScatterRing(CollectiveContext& ctx, ConstBufferView input, const Blocks& blocks, BufferView output,
                       ReduceOp op);

// The allgather half of the ring, in place: block b of `data` (b != rank())
// ends as rank b's block; this rank's block holds its contribution already.
void allgatherRing(CollectiveContext& ctx, BufferView data, const Blocks& blocks);

// The blocks of `counts[i]` elements each, one after the other from offset 0.
Blocks consecutiveBlocks(std::span<const std::size_t> counts);

// Pairwise-exchange alltoall (alltoall.cc): block d of `input`
// (sendBlocks[d]) ends as block rank() (recvBlocks[rank()]) of rank d's
// `output`; this rank's own block is copied. Each pair's messages carry the
// block's element count, checked against the receiver's.
void alltoallPairwise(CollectiveContext& ctx, ConstBufferView input, const Blocks& sendBlocks, BufferView output,
                      const Blocks& recvBlocks);

// Binomial tree from `root`, chunk by chunk (small buffers).
void broadcastTree(CollectiveContext& ctx, BufferView data, int root);

// Chunked chain root -> root+1 -> ... (large buffers: every rank sends the
// data once, chunks in flight on every link).
void broadcastChain(CollectiveContext& ctx, BufferView data, int root);

// Hierarchical collectives for several ranks per node (layout.hierarchical()):
// the ranks of a node talk through shared memory, and only one ring or tree
// per local index crosses between nodes. Buffers of at least
// `bandwidthBytes` take the bandwidth-bound variant. Results are identical
// on every rank; they differ from the flat algorithms' only in the order of
// the summation (see hierarchical.cc).
void allreduceHierarchical(CollectiveContext& ctx, const NodeLayout& layout, BufferView data, ReduceOp op,
                           std::size_t bandwidthBytes);
void broadcastHierarchical(CollectiveContext& ctx, const NodeLayout& layout, BufferView data, int root,
                           std::size_t bandwidthBytes);
void allgatherHierarchical(CollectiveContext& ctx, const NodeLayout& layout, ConstBufferView input, BufferView output);
void reduceScatterHierarchical(CollectiveContext& ctx, const NodeLayout& layout, ConstBufferView input,
                               BufferView output, ReduceOp op);

// Everyone reports to rank 0, which releases everyone. On timeout rank 0
// names every rank that has not arrived and aborts the group; the other
// ranks wait 2 s beyond their deadline for that report before timing out
// on their own.
void barrierViaRankZero(CollectiveContext& ctx);

}  // namespace hpu::comm::detail
