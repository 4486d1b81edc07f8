#include <cstring>
#include <vector>

#include "algorithms.h"
#include "reduce_kernels.h"

namespace hpu::comm::detail {
namespace {

// `part` of `data` as a view.
BufferView viewOf(BufferView data, Range part, std::size_t es) {
  BufferView view = data;
  view.data += part.offset * es;
  view.count = part.size;
  return view;
}

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

void allreduceHalvingDoubling(CollectiveContext& ctx, BufferView data, ReduceOp op) {
  const int n = ctx.size();
  const int r = ctx.rank();
  if (n == 1) return;
  int p2 = 1;
  while (p2 * 2 <= n) p2 *= 2;
  const int extra = n - p2;
  const std::size_t es = ctx.elementSize();

  if (r >= p2) {  // folded in: hand the data over, get the result back
    const std::size_t chunks = ctx.chunksFor(data.count);
    sendAll(ctx, r - p2, data, chunks);
    receiveInto(ctx, r - p2, data, chunks);
    return;
  }
  if (r < extra) receiveAndCombine(ctx, r + p2, data, op, ctx.chunksFor(data.count));
  // Halving: at the step of bit `mask` the range splits in two; the rank
  // with the bit clear keeps the lower half.
  Range mine{0, data.count};
  std::vector<Range> kept;  // the range held before each step, to gather back through
  for (int mask = p2 / 2; mask >= 1; mask >>= 1) {
    const int partner = r ^ mask;
    const Range lower{mine.offset, mine.size / 2}, upper{mine.offset + mine.size / 2, mine.size - mine.size / 2};
    const bool keepLower = (r & mask) == 0;
    const Range give = keepLower ? upper : lower, keep = keepLower ? lower : upper;
    sendAll(ctx, partner, viewOf(data, give, es), ctx.chunksFor(give.size));
    receiveAndCombine(ctx, partner, viewOf(data, keep, es), op, ctx.chunksFor(keep.size));
    kept.push_back(mine);
    mine = keep;
  }
  if (op == ReduceOp::kAvg) divide(data.dtype, data.data + mine.offset * es, mine.size, n);
  // Doubling: the same partners in reverse order; each step's ranges make
  // up the range held before it.
  for (int mask = 1; mask < p2; mask <<= 1) {
    const int partner = r ^ mask;
    const Range whole = kept.back();
    kept.pop_back();
    const Range theirs = mine.offset == whole.offset ? Range{mine.offset + mine.size, whole.size - mine.size}
                                                     : Range{whole.offset, whole.size - mine.size};
    sendAll(ctx, partner, viewOf(data, mine, es), ctx.chunksFor(mine.size));
    receiveInto(ctx, partner, viewOf(data, theirs, es), ctx.chunksFor(theirs.size));
    mine = whole;
  }
  if (r < extra) sendAll(ctx, r + p2, data, ctx.chunksFor(data.count));
}

}  // namespace hpu::comm::detail
