// The ring pipeline shared by allreduce, reduce-scatter and allgather.
//
// The buffer is cut into n blocks (balanced for the flat collectives, any
// given ranges for the phases of the hierarchical ones) and every block into
// the same number of chunks (sized from the largest block). At step t rank r
// receives block (r - t - shift) mod n from rank r-1, chunk by chunk; each
// chunk is consumed (reduced or copied) and, unless t is the last step,
// forwarded at once to rank r+1 as part of step t+1 (the block received at
// step t is the one sent at step t+1). Step 0 sends block (r - shift + 1) mod n.
//
// Chunk c of every block is a ring of its own, so the steps of different
// chunks are software-pipelined: iteration k handles chunk k - t at every
// step t, and sends chunk k + 1 of step 0 first. A rank's step t of a chunk
// then needs what the previous rank forwarded one iteration earlier, and both
// ends of a link see its messages in the same order: iteration k's sends are
// exactly what the next rank receives in iteration k + 1. A link holds about
// one iteration's messages (2(n-1) for allreduce), whatever the buffer size,
// which the shared-memory lanes between ranks of a node (few slots) rely on
// to carry most of them.
#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "algorithms.h"
#include "reduce_kernels.h"

namespace hpu::comm::detail {
namespace {

using Bytes = std::span<const std::byte>;
// Consumes chunk `chunk` received at step `step`; returns the bytes to forward.
using ConsumeChunk = std::function<Bytes(int step, Range chunk, Bytes payload)>;
using InitialChunk = std::function<Bytes(Range chunk)>;

int wrap(int value, int n) { return ((value % n) + n) % n; }

std::size_t largest(const Blocks& blocks) {
  std::size_t most = 0;
  for (const Range& b : blocks) most = std::max(most, b.size);
  return most;
}

void runRing(CollectiveContext& ctx, const Blocks& blocks, int shift, int steps, const InitialChunk& initial,
             const ConsumeChunk& consume) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const int prev = wrap(r - 1, n);
  const int next = wrap(r + 1, n);
  const std::size_t es = ctx.elementSize();
  const std::size_t chunks = ctx.chunksFor(largest(blocks));
  auto block = [&](int b) { return blocks[static_cast<std::size_t>(b)]; };

  const Range first = block(wrap(r - shift + 1, n));
  const auto sendFirst = [&](std::size_t c) {
    if (c < chunks) ctx.send(next, initial(CollectiveContext::chunkOf(first, chunks, c)));
  };
  const auto lastStep = static_cast<std::size_t>(steps);
  sendFirst(0);
  for (std::size_t k = 0; k + 1 < chunks + lastStep; ++k) {
    sendFirst(k + 1);
    for (std::size_t t = k < chunks ? 0 : k - chunks + 1; t < lastStep && t <= k; ++t) {
      const int step = static_cast<int>(t);
      const Range chunk = CollectiveContext::chunkOf(block(wrap(r - step - shift, n)), chunks, k - t);
      Received received = ctx.recv(prev, chunk.size * es);
      const Bytes forward = consume(step, chunk, received.payload);
      if (t + 1 < lastStep) ctx.send(next, forward);
    }
  }
}

}  // namespace

Blocks evenBlocks(std::size_t count, int n) {
  Blocks blocks;
  for (int b = 0; b < n; ++b) blocks.push_back(ProcessGroup::shardRange(count, n, b));
  return blocks;
}

void allreduceRing(CollectiveContext& ctx, BufferView data, ReduceOp op) {
  const int n = ctx.size();
  if (n == 1) return;
  const std::size_t es = ctx.elementSize();
  auto bytesOf = [&](Range chunk) { return Bytes(data.data + chunk.offset * es, chunk.size * es); };
  runRing(ctx, evenBlocks(data.count, n), 2, 2 * (n - 1), bytesOf, [&](int step, Range chunk, Bytes payload) {
    std::byte* dst = data.data + chunk.offset * es;
    if (step < n - 1) {
      combine(data.dtype, op, payload.data(), dst, dst, chunk.size);
      if (step == n - 2 && op == ReduceOp::kAvg) divide(data.dtype, dst, chunk.size, n);
    } else if (!payload.empty()) {
      std::memcpy(dst, payload.data(), payload.size());
    }
    return bytesOf(chunk);
  });
}

void reduceScatterRing(CollectiveContext& ctx, ConstBufferView input, const Blocks& blocks, BufferView output,
                       ReduceOp op) {
  const int n = ctx.size();
  const std::size_t es = ctx.elementSize();
  const Range mine = blocks[static_cast<std::size_t>(ctx.rank())];
  if (n == 1) {
    if (mine.size != 0 && output.data != input.data + mine.offset * es) {
      std::memcpy(output.data, input.data + mine.offset * es, mine.size * es);
    }
    return;
  }
  auto inputBytes = [&](Range chunk) { return Bytes(input.data + chunk.offset * es, chunk.size * es); };
  const std::size_t chunks = ctx.chunksFor(largest(blocks));
  std::vector<std::byte> scratch(ProcessGroup::shardRange(largest(blocks), static_cast<int>(chunks), 0).size * es);
  runRing(ctx, blocks, 2, n - 1, inputBytes, [&](int step, Range chunk, Bytes payload) -> Bytes {
    const std::byte* local = input.data + chunk.offset * es;
    if (step < n - 2) {
      combine(input.dtype, op, payload.data(), local, scratch.data(), chunk.size);
      return Bytes(scratch.data(), chunk.size * es);
    }
    std::byte* dst = output.data + (chunk.offset - mine.offset) * es;
    combine(input.dtype, op, payload.data(), local, dst, chunk.size);
    if (op == ReduceOp::kAvg) divide(input.dtype, dst, chunk.size, n);
    return {};
  });
}

void allgatherRing(CollectiveContext& ctx, BufferView data, const Blocks& blocks) {
  const int n = ctx.size();
  if (n == 1) return;
  const std::size_t es = ctx.elementSize();
  auto bytesOf = [&](Range chunk) { return Bytes(data.data + chunk.offset * es, chunk.size * es); };
  runRing(ctx, blocks, 1, n - 1, bytesOf, [&](int, Range chunk, Bytes payload) {
    if (!payload.empty()) std::memcpy(data.data + chunk.offset * es, payload.data(), payload.size());
    return bytesOf(chunk);
  });
}

}  // namespace hpu::comm::detail
