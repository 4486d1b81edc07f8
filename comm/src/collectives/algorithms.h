// The collective algorithms, each a free function over a CollectiveContext.
// They assume the descriptor in the context matches the arguments and that
// the process group has validated sizes and dtypes.
// Thread-safety: run by the one thread that holds the transport.
#pragma once

#include "context.h"
#include "hpu/comm/buffer_view.h"

namespace hpu::comm::detail {

// Ring allreduce: reduce-scatter then allgather, streamed as one pipeline of
// 2(n-1) steps in chunks. Block b is reduced in ring order starting at rank
// b+1 and ending at its owner b, then copied around: identical on every rank.
void allreduceRing(CollectiveContext& ctx, BufferView data);

// Recursive doubling: log2(p) full-buffer exchanges among the largest power
// of two p <= n ranks; ranks p..n-1 first hand their data to rank r-p and get
// the result back at the end. Each pair combines (lower rank's, higher
// rank's), so both hold bit-identical values after every round.
void allreduceRecursiveDoubling(CollectiveContext& ctx, BufferView data);

// The reduce-scatter half of the ring: output = this rank's block.
void reduceScatterRing(CollectiveContext& ctx, ConstBufferView input, BufferView output);

// The allgather half of the ring: output block r = rank r's input.
void allgatherRing(CollectiveContext& ctx, ConstBufferView input, BufferView output);

// Binomial tree from the root, chunk by chunk (small buffers).
void broadcastTree(CollectiveContext& ctx, BufferView data);

// Chunked chain root -> root+1 -> ... (large buffers: every rank sends the
// data once, chunks in flight on every link).
void broadcastChain(CollectiveContext& ctx, BufferView data);

// Everyone reports to rank 0, which releases everyone. On timeout rank 0
// names every rank that has not arrived and aborts the group; the other
// ranks wait 2 s beyond their deadline for that report before timing out
// on their own.
void barrierViaRankZero(CollectiveContext& ctx);

}  // namespace hpu::comm::detail
