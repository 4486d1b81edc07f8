// Pairwise-exchange alltoall.
//
// n - 1 steps; at step s rank r sends its block for rank r + s and receives
// its block from rank r - s (mod n), so every step pairs the ranks as a
// permutation and each link carries one block. Each block is streamed in
// chunks (ctx.chunksFor of its own size; a block of 0 elements is one empty
// message, which still carries the pair's count to be checked).
//
// Every chunk's place in the output is given to the transport first
// (CollectiveContext::expectPayload): the TCP links read payloads straight
// into it, which saves the copy from their buffers.
//
// Sends run ahead of receives in (step, chunk) order. Before receiving chunk
// k of step s a rank has sent chunks 0..k+1 of its step-s block, and all of
// it once it received its whole step-s block; beyond that it keeps sending
// while it has sent less than its budget more than it received, so small
// alltoalls post every send at once and large ones keep a few chunks in
// flight (the shared-memory lanes carry them in their slots). A send the
// transport queues (Transport::post: the TCP links) returns at once and is
// written while the rank waits to receive; with such sends the budget is
// kSendAheadBytes per peer. The input stays untouched until the queued sends
// are flushed at the end.
// Progress: no transport makes a send wait for its receiver, and a rank
// that has not sent chunk k of step s waits for a (step, chunk) earlier than
// (s, k - 1), so the earliest wait of all ranks is always served.
#include <cstdint>
#include <cstring>

#include "algorithms.h"

namespace hpu::comm::detail {
namespace {

// Over TCP on loopback, 4 ranks on 2 cores: 256 KiB to 1 MiB all within the
// host's noise; more (4-16 MiB) was slower from 1 MiB per rank up, as was
// queueing every send at once (what is in flight leaves the caches).
constexpr std::int64_t kSendAheadBytes = 512 << 10;

// One block's messages: the peer, the block's element range, its chunks.
struct Transfer {
  int peer;
  Range block;
  std::size_t chunks;
};

}  // namespace

Blocks consecutiveBlocks(std::span<const std::size_t> counts) {
  Blocks blocks;
  std::size_t offset = 0;
  for (std::size_t count : counts) {
    blocks.push_back({offset, count});
    offset += count;
  }
  return blocks;
}

void alltoallPairwise(CollectiveContext& ctx, ConstBufferView input, const Blocks& sendBlocks, BufferView output,
                      const Blocks& recvBlocks) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const std::size_t es = ctx.elementSize();
  const auto index = [](int rank) { return static_cast<std::size_t>(rank); };
  std::vector<Transfer> sends, recvs;
  for (int s = 1; s < n; ++s) {
    const int to = (r + s) % n;
    const int from = (r - s + n) % n;
    sends.push_back({to, sendBlocks[index(to)], ctx.chunksFor(sendBlocks[index(to)].size)});
    recvs.push_back({from, recvBlocks[index(from)], ctx.chunksFor(recvBlocks[index(from)].size)});
  }
  const std::size_t steps = sends.size();

  std::size_t step = 0, chunk = 0;  // the next send
  std::int64_t ahead = 0;           // bytes sent less bytes received
  std::int64_t budget = kSendAheadBytes;
  const auto sendNext = [&] {
    const Transfer& t = sends[step];
    const Range piece = CollectiveContext::chunkOf(t.block, t.chunks, chunk);
    if (ctx.postBlock(t.peer, t.block.size, {input.data + piece.offset * es, piece.size * es}))
      budget = kSendAheadBytes * static_cast<std::int64_t>(steps);
    ahead += static_cast<std::int64_t>(piece.size * es);
    if (++chunk == t.chunks) {
      ++step;
      chunk = 0;
    }
  };
  // Sends every chunk before chunk `lastChunk` of step `lastStep`, then more while few bytes are in flight.
  const auto sendBefore = [&](std::size_t lastStep, std::size_t lastChunk) {
    while (step < steps && (step < lastStep || (step == lastStep && chunk < lastChunk))) sendNext();
    while (step < steps && ahead < budget) sendNext();
  };

  for (const Transfer& t : recvs) {
    for (std::size_t k = 0; k < t.chunks; ++k) {
      const Range piece = CollectiveContext::chunkOf(t.block, t.chunks, k);
      if (piece.size != 0) ctx.expectPayload(t.peer, {output.data + piece.offset * es, piece.size * es});
    }
  }
  sendBefore(0, 2);
  const Range self = sendBlocks[index(r)];
  if (self.size != 0) {
    std::memcpy(output.data + recvBlocks[index(r)].offset * es, input.data + self.offset * es, self.size * es);
  }
  for (std::size_t i = 0; i < steps; ++i) {
    const Transfer& t = recvs[i];
    for (std::size_t k = 0; k < t.chunks; ++k) {
      sendBefore(i, k + 2);
      const Range piece = CollectiveContext::chunkOf(t.block, t.chunks, k);
      const Received received = ctx.recvBlock(t.peer, t.block.size, piece.size * es);
      std::byte* destination = output.data + piece.offset * es;
      if (!received.payload.empty() && received.payload.data() != destination) {
        std::memcpy(destination, received.payload.data(), received.payload.size());
      }
      ahead -= static_cast<std::int64_t>(piece.size * es);
    }
    sendBefore(i + 1, 0);
  }
  ctx.flushSends();
}

}  // namespace hpu::comm::detail
