// Hierarchical collectives: the flat algorithms run one after the other on
// two kinds of subgroup, the ranks of one node (shared memory between them)
// and the ranks of one local index, one per node (tcp:// between them).
//
// Allreduce, below `bandwidthBytes` (latency-bound): the ranks of a node hand
// their buffers to the node's first rank, which combines them in local order;
// the first ranks run recursive doubling between nodes; each broadcasts the
// result down a binomial tree in its node. Three hops, one of them between
// nodes, whatever the number of ranks per node.
// Allreduce, from `bandwidthBytes` up: a ring reduce-scatter inside the node
// leaves block l of the node's sum with local index l; the ranks of local
// index l, one per node, allreduce block l (so L rings or recursive
// doublings cross between nodes at once, each carrying 1/L of the data); a
// ring allgather inside the node spreads the blocks.
// Broadcast: the ranks of the root's local index broadcast between nodes,
// then each of them inside its node (trees below `bandwidthBytes`, chains
// above).
// Allgather and reduce-scatter work on bundles: bundle l is the job's blocks
// (ProcessGroup::shardRange) of the ranks of local index l, in node order.
// The buffer is packed bundle after bundle (one copy in memory); allgather
// gathers bundle l between the nodes' ranks of local index l, then the
// bundles inside each node; reduce-scatter reduces the bundles inside each
// node, then bundle l between nodes. Every rank's tcp:// traffic is that of
// its own bundle, 1/L of the buffer.
//
// Every element is reduced along one path and the result copied, so all
// ranks hold the same bits; the order of the summation differs from the flat
// ring's (node sums first), as recursive doubling's does.
#include <cstring>
#include <vector>

#include "algorithms.h"
#include "reduce_kernels.h"

namespace hpu::comm::detail {
namespace {

// The reduction each phase runs: averages are summed, then divided once.
ReduceOp accumulation(ReduceOp op) { return op == ReduceOp::kAvg ? ReduceOp::kSum : op; }

struct Subgroups {
  CollectiveContext node;    // the ranks of this rank's node, by local index
  CollectiveContext across;  // the ranks of this rank's local index, by node
};

Subgroups subgroupsOf(const CollectiveContext& ctx, const NodeLayout& layout) {
  const int me = ctx.rank();
  return {ctx.subgroup(layout.members(layout.nodeIndex(me))), ctx.subgroup(layout.acrossNodes(layout.localIndex(me)))};
}

BufferView slice(BufferView data, Range range) {
  BufferView view = data;
  view.data += range.offset * elementSize(data.dtype);
  view.count = range.size;
  return view;
}

// Rank 0 of `ctx` ends with ((d0 op d1) op d2) ... over every rank's data.
void reduceToFirst(CollectiveContext& ctx, BufferView data, ReduceOp op) {
  const std::size_t es = ctx.elementSize();
  const std::size_t chunks = ctx.chunksFor(data.count);
  for (std::size_t c = 0; c < chunks; ++c) {
    const Range chunk = CollectiveContext::chunkOf({0, data.count}, chunks, c);
    std::byte* mine = data.data + chunk.offset * es;
    if (ctx.rank() != 0) {
      ctx.send(0, {mine, chunk.size * es});
      continue;
    }
    for (int peer = 1; peer < ctx.size(); ++peer) {
      Received received = ctx.recv(peer, chunk.size * es);
      combine(data.dtype, op, mine, received.payload.data(), mine, chunk.size);
    }
  }
}

// Where the job's blocks sit when packed bundle after bundle.
struct Bundles {
  Blocks bundles;                // bundle l in the packed buffer
  std::vector<Blocks> inBundle;  // inBundle[l][k]: node k's block in bundle l, from the bundle's start
  std::vector<Blocks> original;  // original[l][k]: that block in the unpacked buffer
};

Bundles bundlesOf(const NodeLayout& layout, std::size_t count, int worldSize) {
  const int perNode = static_cast<int>(layout.members(0).size());
  Bundles b;
  std::size_t offset = 0;
  for (int l = 0; l < perNode; ++l) {
    const std::size_t start = offset;
    b.inBundle.emplace_back();
    b.original.emplace_back();
    for (int rank : layout.acrossNodes(l)) {
      const Range block = ProcessGroup::shardRange(count, worldSize, rank);
      b.inBundle.back().push_back({offset - start, block.size});
      b.original.back().push_back(block);
      offset += block.size;
    }
    b.bundles.push_back({start, offset - start});
  }
  return b;
}

enum class Direction { kPack, kUnpack };

void repack(const Bundles& b, std::size_t es, const std::byte* from, std::byte* to, Direction direction) {
  for (std::size_t l = 0; l < b.bundles.size(); ++l) {
    for (std::size_t k = 0; k < b.original[l].size(); ++k) {
      const std::size_t packed = (b.bundles[l].offset + b.inBundle[l][k].offset) * es;
      const std::size_t unpacked = b.original[l][k].offset * es;
      const std::size_t bytes = b.original[l][k].size * es;
      if (bytes == 0) continue;
      if (direction == Direction::kPack) {
        std::memcpy(to + packed, from + unpacked, bytes);
      } else {
        std::memcpy(to + unpacked, from + packed, bytes);
      }
    }
  }
}

}  // namespace

void allreduceHierarchical(CollectiveContext& ctx, const NodeLayout& layout, BufferView data, ReduceOp op,
                           std::size_t bandwidthBytes) {
  auto [node, across] = subgroupsOf(ctx, layout);
  const ReduceOp acc = accumulation(op);
  if (data.bytes() < bandwidthBytes) {
    reduceToFirst(node, data, acc);
    if (node.rank() == 0) {
      allreduceRecursiveDoubling(across, data, acc);
      if (op == ReduceOp::kAvg) divide(data.dtype, data.data, data.count, ctx.size());
    }
    broadcastTree(node, data, 0);
    return;
  }
  const Blocks blocks = evenBlocks(data.count, node.size());
  const BufferView shard = slice(data, blocks[static_cast<std::size_t>(node.rank())]);
  reduceScatterRing(node, data, blocks, shard, acc);
  if (shard.bytes() >= bandwidthBytes) {
    allreduceRing(across, shard, acc);
  } else {
    allreduceRecursiveDoubling(across, shard, acc);
  }
  if (op == ReduceOp::kAvg) divide(shard.dtype, shard.data, shard.count, ctx.size());
  allgatherRing(node, data, blocks);
}

void broadcastHierarchical(CollectiveContext& ctx, const NodeLayout& layout, BufferView data, int root,
                           std::size_t bandwidthBytes) {
  auto [node, across] = subgroupsOf(ctx, layout);
  const auto broadcast = data.bytes() >= bandwidthBytes ? broadcastChain : broadcastTree;
  if (layout.localIndex(ctx.rank()) == layout.localIndex(root)) broadcast(across, data, layout.nodeIndex(root));
  broadcast(node, data, layout.localIndex(root));
}

void allgatherHierarchical(CollectiveContext& ctx, const NodeLayout& layout, ConstBufferView input, BufferView output) {
  auto [node, across] = subgroupsOf(ctx, layout);
  const std::size_t es = ctx.elementSize();
  const Bundles b = bundlesOf(layout, output.count, ctx.size());
  const auto l = static_cast<std::size_t>(node.rank());
  const auto k = static_cast<std::size_t>(across.rank());
  std::vector<std::byte> packed(output.bytes());
  BufferView all = output;
  all.data = packed.data();
  const BufferView bundle = slice(all, b.bundles[l]);
  if (input.count != 0) std::memcpy(bundle.data + b.inBundle[l][k].offset * es, input.data, input.count * es);
  allgatherRing(across, bundle, b.inBundle[l]);
  allgatherRing(node, all, b.bundles);
  repack(b, es, packed.data(), output.data, Direction::kUnpack);
}

void reduceScatterHierarchical(CollectiveContext& ctx, const NodeLayout& layout, ConstBufferView input,
                               BufferView output, ReduceOp op) {
  auto [node, across] = subgroupsOf(ctx, layout);
  const std::size_t es = ctx.elementSize();
  const Bundles b = bundlesOf(layout, input.count, ctx.size());
  const auto l = static_cast<std::size_t>(node.rank());
  const ReduceOp acc = accumulation(op);
  std::vector<std::byte> packed(input.bytes());
  repack(b, es, input.data, packed.data(), Direction::kPack);
  BufferView all{};
  all.data = packed.data();
  all.count = input.count;
  all.dtype = input.dtype;
  const BufferView bundle = slice(all, b.bundles[l]);
  reduceScatterRing(node, all, b.bundles, bundle, acc);
  reduceScatterRing(across, bundle, b.inBundle[l], output, acc);
  if (op == ReduceOp::kAvg) divide(output.dtype, output.data, output.count, ctx.size());
}

}  // namespace hpu::comm::detail
