// Broadcasts stream the root's buffer down a tree chunk by chunk: every rank
// receives each chunk from its parent and forwards it to its children before
// the next one, so chunks are in flight on every edge at once. The two trees
// differ only in shape (ranks are relative to the root, which is 0):
//  - binomial: v >= 1 receives from v - highest_bit(v); v sends to v + m for
//    every power of two m > v (largest subtree first). log2(n) deep.
//  - chain: v receives from v - 1 and sends to v + 1. Every rank sends the
//    data once, which is what large buffers need.
#include <cstring>
#include <vector>

#include "algorithms.h"

namespace hpu::comm::detail {
namespace {

struct TreePosition {
  int parent = -1;            // relative rank, -1 at the root
  std::vector<int> children;  // relative ranks
};

void streamDownTree(CollectiveContext& ctx, BufferView data, int root, const TreePosition& position) {
  const int n = ctx.size();
  auto absolute = [&](int relative) { return (relative + root) % n; };
  const std::size_t es = ctx.elementSize();
  const std::size_t chunks = ctx.chunksFor(data.count);
  for (std::size_t c = 0; c < chunks; ++c) {
    const Range chunk = CollectiveContext::chunkOf({0, data.count}, chunks, c);
    std::byte* bytes = data.data + chunk.offset * es;
    if (position.parent >= 0) {
      Received received = ctx.recv(absolute(position.parent), chunk.size * es);
      if (chunk.size != 0) std::memcpy(bytes, received.payload.data(), chunk.size * es);
    }
    for (int child : position.children) ctx.send(absolute(child), {bytes, chunk.size * es});
  }
}

int relativeRank(const CollectiveContext& ctx, int root) {
  const int n = ctx.size();
  return (ctx.rank() - root + n) % n;
}

}  // namespace

void broadcastTree(CollectiveContext& ctx, BufferView data, int root) {
  const int n = ctx.size();
  if (n == 1) return;
  const int v = relativeRank(ctx, root);
  TreePosition position;
  if (v > 0) {
    int highBit = 1;
    while (highBit * 2 <= v) highBit *= 2;
    position.parent = v - highBit;
  }
  int m = 1;
  while (m < n) m *= 2;
  for (m /= 2; m > v; m /= 2) {
    if (v + m < n) position.children.push_back(v + m);
  }
  streamDownTree(ctx, data, root, position);
}

void broadcastChain(CollectiveContext& ctx, BufferView data, int root) {
  const int n = ctx.size();
  if (n == 1) return;
  const int v = relativeRank(ctx, root);
  TreePosition position;
  position.parent = v - 1;
  if (v + 1 < n) position.children.push_back(v + 1);
  streamDownTree(ctx, data, root, position);
}

}  // namespace hpu::comm::detail
