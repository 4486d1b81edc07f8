#include <cstring>

#include "algorithms.h"
#include "reduce_kernels.h"

namespace hpu::comm::detail {
namespace {

void sendAll(CollectiveContext& ctx, int peer, BufferView data, std::size_t chunks) {
  const std::size_t es = ctx.elementSize();
  for (std::size_t c = 0; c < chunks; ++c) {
    const Range chunk = CollectiveContext::chunkOf({0, data.count}, chunks, c);
    ctx.send(peer, {data.data + chunk.offset * es, chunk.size * es});
  }
}

// Receives `peer`'s whole buffer and combines it with ours: out = low op high,
// where low is the lower-ranked side, so both partners compute the same bits.
void receiveAndCombine(CollectiveContext& ctx, int peer, BufferView data, ReduceOp op, std::size_t chunks) {
  const std::size_t es = ctx.elementSize();
  const bool mineIsLow = ctx.rank() < peer;
  for (std::size_t c = 0; c < chunks; ++c) {
    const Range chunk = CollectiveContext::chunkOf({0, data.count}, chunks, c);
    Received received = ctx.recv(peer, chunk.size * es);
    std::byte* mine = data.data + chunk.offset * es;
    const std::byte* theirs = received.payload.data();
    combine(data.dtype, op, mineIsLow ? mine : theirs, mineIsLow ? theirs : mine, mine, chunk.size);
  }
}

void receiveInto(CollectiveContext& ctx, int peer, BufferView data, std::size_t chunks) {
  const std::size_t es = ctx.elementSize();
  for (std::size_t c = 0; c < chunks; ++c) {
    const Range chunk = CollectiveContext::chunkOf({0, data.count}, chunks, c);
    Received received = ctx.recv(peer, chunk.size * es);
    if (!received.payload.empty()) std::memcpy(data.data + chunk.offset * es, received.payload.data(), chunk.size * es);
  }
}

}  // namespace

void allreduceRecursiveDoubling(CollectiveContext& ctx, BufferView data, ReduceOp op) {
  const int n = ctx.size();
  const int r = ctx.rank();
  if (n == 1) return;
  int p2 = 1;
  while (p2 * 2 <= n) p2 *= 2;
  const int extra = n - p2;
  const std::size_t chunks = ctx.chunksFor(data.count);

  if (r >= p2) {  // folded in: hand the data over, get the result back
    sendAll(ctx, r - p2, data, chunks);
    receiveInto(ctx, r - p2, data, chunks);
    return;
  }
  if (r < extra) receiveAndCombine(ctx, r + p2, data, op, chunks);
  for (int mask = 1; mask < p2; mask <<= 1) {
    const int partner = r ^ mask;
    sendAll(ctx, partner, data, chunks);
    receiveAndCombine(ctx, partner, data, op, chunks);
  }
  if (op == ReduceOp::kAvg) divide(data.dtype, data.data, data.count, n);
  if (r < extra) sendAll(ctx, r + p2, data, chunks);
}

}  // namespace hpu::comm::detail
