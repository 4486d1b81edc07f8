#include "hpu/comm/process_group.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <initializer_list>

#include <spdlog/fmt/fmt.h>

#include "check.h"
#include "collective_schedule.h"
#include "collectives/algorithms.h"
#include "collectives/descriptor.h"
#include "collectives/native.h"
#include "collectives/node_layout.h"
#include "execution_lane.h"
#include "hpu/comm/errors.h"
#include "hpu/comm/fault_injection.h"
#include "rank_list.h"
#include "subset_transport.h"
#include "work_state.h"

namespace hpu::comm {

using detail::CollectiveContext;
using detail::CollectiveDescriptor;
using detail::CollectiveKind;

struct ProcessGroup::Operation final : detail::LaneTask {
  explicit Operation(ProcessGroup& owner) : group(owner) {}

  // Numbers the operation in its group's order.
  void scheduled() override {
    {
      std::lock_guard lock(group.mutex_);
      descriptor.sequence = group.nextSequence_++;
    }
    work = std::make_shared<detail::WorkState>(detail::describe(descriptor));
  }
  std::exception_ptr run(std::exception_ptr failure) override { return group.execute(*this, std::move(failure)); }

  ProcessGroup& group;
  CollectiveDescriptor descriptor;
  std::function<void(CollectiveContext&)> body;
  std::shared_ptr<detail::WorkState> work;
  bool async = false;  // issued by allreduceAsync
  bool payloadless = false;  // a shape-only group's buffer without storage: nothing moves
};

namespace {

bool reducible(DType dtype) { return dtype == DType::kFloat32 || dtype == DType::kBFloat16; }

// Whether a collective of a shape-only group (`shape_only`) on these buffers
// moves nothing: one of them has elements but no storage.
bool payloadless(bool shape_only, std::initializer_list<ConstBufferView> views) {
  return shape_only && std::any_of(views.begin(), views.end(),
                                   [](const ConstBufferView& v) { return v.data == nullptr && v.count > 0; });
}

detail::NodeLayout layoutOf(const Transport& transport) {
  std::vector<int> nodeOf;
  for (int r = 0; r < transport.size(); ++r) nodeOf.push_back(transport.node(r));
  return detail::NodeLayout(nodeOf);
}

}  // namespace

std::shared_ptr<ProcessGroup::Operation> ProcessGroup::makeOperation(CollectiveKind kind, DType dtype,
                                                                     std::uint64_t count,
                                                                     std::chrono::milliseconds timeout) {
  auto op = std::make_shared<Operation>(*this);
  op->descriptor.kind = kind;
  op->descriptor.dtype = dtype;
  op->descriptor.count = count;
  op->timeout = timeout.count() > 0 ? timeout : options_.timeout;
  return op;
}

ProcessGroup::ProcessGroup(std::unique_ptr<Transport> transport, std::shared_ptr<Store> store,
                           ProcessGroupOptions options)
    : ProcessGroup(std::move(transport), std::move(store), options, std::make_shared<detail::ExecutionLane>(),
                   nullptr) {}

ProcessGroup::ProcessGroup(std::unique_ptr<Transport> transport, std::shared_ptr<Store> store,
                           ProcessGroupOptions options, std::shared_ptr<detail::ExecutionLane> lane,
                           ProcessGroup* parent)
    : transport_(std::move(transport)),
      store_(std::move(store)),
      options_(options),
      rank_(transport_->rank()),
      size_(transport_->size()),
      layout_(std::make_unique<const detail::NodeLayout>(layoutOf(*transport_))),
      lane_(std::move(lane)),
      parent_(parent) {
  HPU_COMM_CHECK(options_.chunkBytes >= 64, "ProcessGroupOptions::chunkBytes must be at least 64");
  HPU_COMM_CHECK(options_.timeout.count() > 0, "ProcessGroupOptions::timeout must be positive");
  if (options_.shapeOnly) schedule_ = std::make_unique<detail::CollectiveSchedule>();
  if (!parent_)
    for (int r = 0; r < size_; ++r) members_.push_back(r);
  if (parent_) {
    ++parent_->liveSubgroups_;
    std::lock_guard lock(parent_->mutex_);
    parent_->subgroups_.push_back(this);
  }
}

ProcessGroup::~ProcessGroup() {
  HPU_COMM_CHECK(liveSubgroups_ == 0, "a process group was destroyed before the groups split from it");
  lane_->drain();
  if (native_ && lane_->failure()) native_->abandon();
  if (parent_) {
    std::lock_guard lock(parent_->mutex_);
    std::erase(parent_->subgroups_, this);
    --parent_->liveSubgroups_;
  }
}

ProcessGroup::Range ProcessGroup::shardRange(std::size_t total, int worldSize, int rank) {
  const auto n = static_cast<std::size_t>(worldSize);
  const auto r = static_cast<std::size_t>(rank);
  const std::size_t base = total / n;
  const std::size_t extra = total % n;
  return {r * base + std::min(r, extra), base + (r < extra ? 1 : 0)};
}

void ProcessGroup::useNativeCollectives(std::unique_ptr<detail::NativeCollectives> native) {
  std::lock_guard lock(mutex_);
  HPU_COMM_CHECK(nextSequence_ == 0, "native collectives must be chosen before the first collective");
  native_ = std::move(native);
}

std::string ProcessGroup::nativeCollectivesName() const { return native_ ? native_->name() : ""; }

void ProcessGroup::allreduce(BufferView data, const AllreduceOptions& options) {
  run(makeAllreduce(data, options), /*wait=*/true);
}

Work ProcessGroup::allreduceAsync(BufferView data, const AllreduceOptions& options) {
  auto op = makeAllreduce(data, options);
  run(op, /*wait=*/false);
  return Work(op->work);
}

std::shared_ptr<ProcessGroup::Operation> ProcessGroup::makeAllreduce(BufferView data,
                                                                     const AllreduceOptions& options) {
  HPU_COMM_CHECK(reducible(data.dtype), "allreduce needs a float32 or bfloat16 buffer");
  auto op = makeOperation(CollectiveKind::kAllreduce, data.dtype, data.count, options.timeout);
  op->payloadless = payloadless(options_.shapeOnly, {data});
  op->descriptor.op = options.op;
  Algorithm algorithm = options.algorithm;
  if (algorithm == Algorithm::kAuto && layout_->hierarchical()) algorithm = Algorithm::kHierarchical;
  if (algorithm == Algorithm::kAuto || (algorithm == Algorithm::kHierarchical && !layout_->regular())) {
    const std::size_t bytes = data.bytes();
    algorithm = bytes < options_.ringThresholdBytes                            ? Algorithm::kRecursiveDoubling
                : size_ >= 4 && bytes <= options_.halvingDoublingMaxBytes ? Algorithm::kHalvingDoubling
                                                                           : Algorithm::kRing;
  }
  op->descriptor.algorithm = algorithm;
  const ReduceOp reduceOp = options.op;
  op->body = [this, data, algorithm, reduceOp](CollectiveContext& ctx) {
    if (native_) return native_->allreduce(ctx, data, reduceOp);
    switch (algorithm) {
      case Algorithm::kRing: detail::allreduceRing(ctx, data, reduceOp); return;
      case Algorithm::kRecursiveDoubling: detail::allreduceRecursiveDoubling(ctx, data, reduceOp); return;
      case Algorithm::kHalvingDoubling: detail::allreduceHalvingDoubling(ctx, data, reduceOp); return;
      case Algorithm::kHierarchical:
      case Algorithm::kAuto:
        detail::allreduceHierarchical(ctx, *layout_, data, reduceOp, options_.ringThresholdBytes);
        return;
    }
  };
  return op;
}

void ProcessGroup::broadcast(BufferView data, int root, const CollectiveOptions& options) {
  HPU_COMM_CHECK(root >= 0 && root < size_, "broadcast root must be a rank of the group");
  auto op = makeOperation(CollectiveKind::kBroadcast, data.dtype, data.count, options.timeout);
  op->payloadless = payloadless(options_.shapeOnly, {data});
  op->descriptor.root = root;
  const bool chain = data.bytes() >= options_.ringThresholdBytes;
  if (layout_->hierarchical()) op->descriptor.algorithm = Algorithm::kHierarchical;
  op->body = [this, data, chain, root](CollectiveContext& ctx) {
    if (native_) {
      native_->broadcast(ctx, data, root);
    } else if (layout_->hierarchical()) {
      detail::broadcastHierarchical(ctx, *layout_, data, root, options_.ringThresholdBytes);
    } else if (chain) {
      detail::broadcastChain(ctx, data, root);
    } else {
      detail::broadcastTree(ctx, data, root);
    }
  };
  run(op, /*wait=*/true);
}

void ProcessGroup::barrier(std::string_view name, const CollectiveOptions& options) {
  auto op = makeOperation(CollectiveKind::kBarrier, DType::kByte, 0, options.timeout);
  op->descriptor.name = std::string(name);
  op->body = [this](CollectiveContext& ctx) {
    if (native_) return native_->barrier(ctx);
    detail::barrierViaRankZero(ctx);
  };
  run(op, /*wait=*/true);
}

void ProcessGroup::allgather(ConstBufferView input, BufferView output, const CollectiveOptions& options) {
  HPU_COMM_CHECK(input.dtype == output.dtype, "allgather input and output must have the same dtype");
  HPU_COMM_CHECK(input.count == shardRange(output.count, size_, rank_).size,
                 "allgather input must hold exactly this rank's shard of the output");
  auto op = makeOperation(CollectiveKind::kAllgather, output.dtype, output.count, options.timeout);
  op->payloadless = payloadless(options_.shapeOnly, {input, output});
  if (layout_->hierarchical()) op->descriptor.algorithm = Algorithm::kHierarchical;
  op->body = [this, input, output](CollectiveContext& ctx) {
    if (native_) return native_->allgather(ctx, input, output);
    if (layout_->hierarchical()) {
      detail::allgatherHierarchical(ctx, *layout_, input, output);
      return;
    }
    const Range mine = shardRange(output.count, size_, rank_);
    if (mine.size != 0) std::memcpy(output.data + mine.offset * elementSize(output.dtype), input.data, input.bytes());
    detail::allgatherRing(ctx, output, detail::evenBlocks(output.count, size_));
  };
  run(op, /*wait=*/true);
}

void ProcessGroup::reduceScatter(ConstBufferView input, BufferView output, ReduceOp reduceOp,
                                 const CollectiveOptions& options) {
  HPU_COMM_CHECK(reducible(input.dtype), "reduceScatter needs a float32 or bfloat16 buffer");
  HPU_COMM_CHECK(input.dtype == output.dtype, "reduceScatter input and output must have the same dtype");
  HPU_COMM_CHECK(output.count == shardRange(input.count, size_, rank_).size,
                 "reduceScatter output must hold exactly this rank's shard of the input");
  auto op = makeOperation(CollectiveKind::kReduceScatter, input.dtype, input.count, options.timeout);
  op->payloadless = payloadless(options_.shapeOnly, {input, output});
  op->descriptor.op = reduceOp;
  if (layout_->hierarchical()) op->descriptor.algorithm = Algorithm::kHierarchical;
  op->body = [this, input, output, reduceOp](CollectiveContext& ctx) {
    if (native_) return native_->reduceScatter(ctx, input, output, reduceOp);
    if (layout_->hierarchical()) {
      detail::reduceScatterHierarchical(ctx, *layout_, input, output, reduceOp);
    } else {
      detail::reduceScatterRing(ctx, input, detail::evenBlocks(input.count, size_), output, reduceOp);
    }
  };
  run(op, /*wait=*/true);
}

void ProcessGroup::alltoall(ConstBufferView input, std::span<const std::size_t> sendCounts, BufferView output,
                            std::span<const std::size_t> recvCounts, const CollectiveOptions& options) {
  HPU_COMM_CHECK(input.dtype == output.dtype, "alltoall input and output must have the same dtype");
  HPU_COMM_CHECK(sendCounts.size() == static_cast<std::size_t>(size_) &&
                     recvCounts.size() == static_cast<std::size_t>(size_),
                 "alltoall takes one send count and one receive count per rank of the group");
  auto sendBlocks = detail::consecutiveBlocks(sendCounts);
  auto recvBlocks = detail::consecutiveBlocks(recvCounts);
  HPU_COMM_CHECK(sendBlocks.back().offset + sendBlocks.back().size == input.count,
                 "alltoall input must hold exactly the sum of its send counts");
  HPU_COMM_CHECK(recvBlocks.back().offset + recvBlocks.back().size == output.count,
                 "alltoall output must hold exactly the sum of its receive counts");
  auto op = makeOperation(CollectiveKind::kAlltoall, input.dtype, input.count, options.timeout);
  op->payloadless = payloadless(options_.shapeOnly, {input, output});
  op->body = [this, input, output, sendBlocks = std::move(sendBlocks),
              recvBlocks = std::move(recvBlocks)](CollectiveContext& ctx) {
    if (native_) return native_->alltoall(ctx, input, sendBlocks, output, recvBlocks);
    detail::alltoallPairwise(ctx, input, sendBlocks, output, recvBlocks);
  };
  run(op, /*wait=*/true);
}

std::vector<std::size_t> ProcessGroup::alltoallCounts(std::span<const std::size_t> sendCounts,
                                                      const CollectiveOptions& options) {
  HPU_COMM_CHECK(sendCounts.size() == static_cast<std::size_t>(size_), "alltoallCounts takes one count per rank");
  const std::vector<std::uint64_t> sent(sendCounts.begin(), sendCounts.end());
  std::vector<std::uint64_t> received(sent.size());
  const std::vector<std::size_t> eightBytes(sent.size(), sizeof(std::uint64_t));
  alltoall(std::as_bytes(std::span(sent)), eightBytes, std::as_writable_bytes(std::span(received)), eightBytes,
           options);
  if (options_.simulated) return {sendCounts.begin(), sendCounts.end()};
  return {received.begin(), received.end()};
}

void ProcessGroup::abort(std::string_view reason) {
  lane_->fail(
      std::make_exception_ptr(CommError(fmt::format("rank {}: the process group was aborted: {}", rank_, reason))));
  transport_->abort(reason);
}

void ProcessGroup::run(std::shared_ptr<Operation> op, bool wait) {
  op->async = !wait;
  if (wait || options_.simulated || op->payloadless) {
    lane_->runNow(*op);
  } else {
    lane_->submit(std::move(op));
  }
}

void ProcessGroup::setObserver(std::shared_ptr<CollectiveObserver> observer) {
  std::lock_guard lock(mutex_);
  observer_ = std::move(observer);
}

std::exception_ptr ProcessGroup::execute(Operation& op, std::exception_ptr error) {
  std::shared_ptr<CollectiveObserver> observer;
  {
    std::lock_guard lock(mutex_);
    observer = observer_;
    if (schedule_ && !error) schedule_->record(op.descriptor);
  }
  const auto begin = Clock::now();
  if (!error && !options_.simulated && !op.payloadless) {
    try {
      // Fault sites count the collectives of the job's group, where rank_ is the global rank.
      if (!parent_ && faultPoint(FaultSite::kCollective, static_cast<std::int64_t>(op.descriptor.sequence), rank_) ==
                          FaultAction::kDrop)
        transport_->dropConnectionsForTesting();
      transport_->setActivity(detail::describe(op.descriptor));
      CollectiveContext ctx(*transport_, op.descriptor, Clock::now() + op.timeout, op.timeout, options_.chunkBytes);
      op.body(ctx);
      transport_->setActivity("");
    } catch (const PeerLostError&) {
      error = std::current_exception();  // the lost rank is known to everyone already
    } catch (const std::exception& e) {
      error = std::current_exception();
      transport_->abort(e.what());
    }
  }
  if (observer) {
    observer->onCollective({.kind = detail::kindName(op.descriptor.kind),
                            .description = detail::describe(op.descriptor),
                            .dtype = op.descriptor.dtype,
                            .count = op.descriptor.count,
                            .sequence = op.descriptor.sequence,
                            .groupNodes = layout_->nodes(),
                            .groupSize = size_,
                            .async = op.async,
                            .failed = error != nullptr,
                            .begin = begin,
                            .end = Clock::now()});
  }
  op.work->complete(error);
  return error;
}

std::unique_ptr<ProcessGroup> ProcessGroup::split(std::vector<int> ranks) {
  checkSubgroupRanks(ranks);
  std::vector<int> members;
  for (int r : ranks) members.push_back(members_[static_cast<std::size_t>(r)]);
  auto transport = std::make_unique<detail::SubsetTransport>(*transport_, std::move(ranks));
  auto group = std::unique_ptr<ProcessGroup>(new ProcessGroup(std::move(transport), store_, options_, lane_, this));
  group->members_ = std::move(members);
  return group;
}

ScheduleCheck ProcessGroup::checkSchedules(Clock::time_point deadline) {
  HPU_COMM_CHECK(parent_ == nullptr && schedule_ != nullptr,
                 "checkSchedules runs on the job's group of a shape-only run");
  lane_->drain();
  std::vector<ProcessGroup*> groups{this};
  for (std::size_t i = 0; i < groups.size(); ++i) {
    std::lock_guard lock(groups[i]->mutex_);
    groups.insert(groups.end(), groups[i]->subgroups_.begin(), groups[i]->subgroups_.end());
  }
  const std::uint64_t check = checks_++;
  // Groups with the same members (the job's and a pipeline's with two
  // ranks, a pair's two links) are told apart by their place among them.
  const auto key = [&](const ProcessGroup& g) {
    const auto self = std::find(groups.begin(), groups.end(), &g);
    const auto same = std::count_if(groups.begin(), self, [&](const ProcessGroup* o) { return o->members_ == g.members_; });
    return detail::scheduleKey(g.members_, static_cast<std::size_t>(same), check);
  };
  ScheduleCheck out;
  // Every group this rank leads is published before any other is read.
  for (ProcessGroup* g : groups) {
    std::lock_guard lock(g->mutex_);
    if (g->rank_ == 0) g->schedule_->publish(*store_, key(*g), deadline);
  }
  for (ProcessGroup* g : groups) {
    std::lock_guard lock(g->mutex_);
    if (g->rank_ != 0) {
      const std::string difference = g->schedule_->compare(*store_, key(*g), g->members_.front(), deadline);
      if (!difference.empty()) {
        std::vector<int> sorted = g->members_;
        std::sort(sorted.begin(), sorted.end());
        throw CollectiveMismatchError(fmt::format(
            "rank {}: the collectives of its group of ranks {} differ from that group's first rank's (rank {}): {}",
            rank_, detail::formatRankList(sorted), g->members_.front(), difference));
      }
    }
    ++out.groups;
    out.collectives += g->schedule_->count();
    *g->schedule_ = detail::CollectiveSchedule();
  }
  return out;
}

void ProcessGroup::checkSubgroupRanks(const std::vector<int>& ranks) const {
  const auto reject = [&](const std::string& reason) {
    throw CommError(fmt::format("rank {}: cannot split ranks [{}] from a process group of {}: {}", rank_,
                                fmt::join(ranks, ", "), size_, reason));
  };
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= size_) {
      reject(fmt::format("rank {} is not in the group (its ranks are 0 to {})", ranks[i], size_ - 1));
    }
    if (i > 0 && ranks[i] == ranks[i - 1]) reject(fmt::format("rank {} is listed twice", ranks[i]));
    if (i > 0 && ranks[i] < ranks[i - 1]) {
      reject(fmt::format("rank {} follows rank {}; list the ranks ascending", ranks[i], ranks[i - 1]));
    }
  }
  if (!std::binary_search(ranks.begin(), ranks.end(), rank_)) {
    reject(fmt::format("this rank ({}) is not among them; only the ranks of a subgroup call split, each with the "
                       "same list",
                       rank_));
  }
}

}  // namespace hpu::comm
