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
// Messages go out and are taken in one order, chunk-major: chunk 0 of every
// step's block, then chunk 1 of every block that has one, and so on, so
// every link has data in flight at once and a rank held up by one slow peer
// still moves data with the others (4 ranks over TCP from 4 MiB: 0.8x the
// time of the step-by-step order). Before taking message (k, s) a rank has
// sent every message up to (k, s) in that order; beyond that it keeps
// sending while it has sent less than its budget more than it received, so
// small alltoalls post every send at once and large ones keep a few chunks
// in flight (the shared-memory lanes carry them in their slots). A send the
// transport queues (Transport::post: the TCP links) returns at once and is
// written while the rank waits to receive; with such sends the budget is
// kSendAheadBytes per peer. The input stays untouched until the queued sends
// are flushed at the end.
// A rank's own block is copied in as many pieces as it takes messages, a
// piece before each wait, while its peers' messages arrive (copied whole
// before the first wait, a 32 MiB block held every socket idle meanwhile:
// 2 ranks at 16 and 64 MiB took 1.2x the time).
// Progress: no transport makes a send wait for its receiver, and the rank
// whose wait is earliest in the order waits for a message its sender sent
// before its own (no earlier) wait, so that wait is always served.
#include <algorithm>
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

  // The messages in the order they are sent and received (chunk-major).
  struct Item {
    std::size_t step, chunk;
    bool operator<=(const Item& o) const { return chunk < o.chunk || (chunk == o.chunk && step <= o.step); }
  };
  std::size_t most = 0;
  for (std::size_t s = 0; s < steps; ++s) most = std::max({most, sends[s].chunks, recvs[s].chunks});
  std::vector<Item> sendOrder, recvOrder;
  for (std::size_t k = 0; k < most; ++k) {
    for (std::size_t s = 0; s < steps; ++s) {
      if (k < sends[s].chunks) sendOrder.push_back({s, k});
      if (k < recvs[s].chunks) recvOrder.push_back({s, k});
    }
  }

  std::size_t next = 0;    // the next send
  std::int64_t ahead = 0;  // bytes sent less bytes received
  std::int64_t budget = kSendAheadBytes;
  const auto sendNext = [&] {
    const Transfer& t = sends[sendOrder[next].step];
    const Range piece = CollectiveContext::chunkOf(t.block, t.chunks, sendOrder[next].chunk);
    if (ctx.postBlock(t.peer, t.block.size, {input.data + piece.offset * es, piece.size * es}))
      budget = kSendAheadBytes * static_cast<std::int64_t>(steps);
    ahead += static_cast<std::int64_t>(piece.size * es);
    ++next;
  };
  // Sends every message up to `last` in that order, then more while few bytes are in flight.
  const auto sendThrough = [&](Item last) {
    while (next < sendOrder.size() && sendOrder[next] <= last) sendNext();
    while (next < sendOrder.size() && ahead < budget) sendNext();
  };

  for (const Transfer& t : recvs) {
    for (std::size_t k = 0; k < t.chunks; ++k) {
      const Range piece = CollectiveContext::chunkOf(t.block, t.chunks, k);
      if (piece.size != 0) ctx.expectPayload(t.peer, {output.data + piece.offset * es, piece.size * es});
    }
  }
  sendThrough({0, 0});
  const Range self = sendBlocks[index(r)];
  const std::size_t pieces = std::max<std::size_t>(1, recvOrder.size());
  const auto copyOwn = [&](std::size_t k) {
    const Range piece = ProcessGroup::shardRange(self.size, static_cast<int>(pieces), static_cast<int>(k));
    if (piece.size != 0)
      std::memcpy(output.data + (recvBlocks[index(r)].offset + piece.offset) * es,
                  input.data + (self.offset + piece.offset) * es, piece.size * es);
  };
  if (recvOrder.empty()) copyOwn(0);
  for (std::size_t j = 0; j < recvOrder.size(); ++j) {
    sendThrough(recvOrder[j]);
    copyOwn(j);
    const Transfer& t = recvs[recvOrder[j].step];
    const Range piece = CollectiveContext::chunkOf(t.block, t.chunks, recvOrder[j].chunk);
    const Received received = ctx.recvBlock(t.peer, t.block.size, piece.size * es);
    std::byte* destination = output.data + piece.offset * es;
    if (!received.payload.empty() && received.payload.data() != destination) {
      std::memcpy(destination, received.payload.data(), received.payload.size());
    }
    ahead -= static_cast<std::int64_t>(piece.size * es);
  }
  while (next < sendOrder.size()) sendNext();
  ctx.flushSends();
}

}  // namespace hpu::comm::detail
