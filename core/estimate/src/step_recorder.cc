#include "hpu/core/estimate/step_recorder.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/fmt/ranges.h>

#include <algorithm>

namespace hpu::core::estimate {
namespace {

std::string describe(std::span<const device::OperandInfo> operands) {
  std::string out;
  for (const device::OperandInfo& o : operands) {
    if (!out.empty()) out += ' ';
    out += fmt::format("{}[{}]", device::dtypeName(o.dtype), fmt::join(o.shape, ","));
  }
  return out;
}

device::CollectiveKind kindOf(std::string_view kind) {
  if (kind == "allreduce") return device::CollectiveKind::kAllreduce;
  if (kind == "reduce_scatter") return device::CollectiveKind::kReduceScatter;
  if (kind == "allgather") return device::CollectiveKind::kAllgather;
  if (kind == "broadcast") return device::CollectiveKind::kBroadcast;
  if (kind == "alltoall") return device::CollectiveKind::kAlltoall;
  return device::CollectiveKind::kBarrier;
}

}  // namespace

StepRecorder::StepRecorder(const device::GaudiModel& model, device::Device& device) : model_(model), device_(device) {}

void StepRecorder::notePeak(const std::string& where) {
  const std::uint64_t peak = device_.allocator().stats().maxInUse;
  if (peak > peak_bytes_) {
    peak_bytes_ = peak;
    peak_at_ = where;
  }
}

void StepRecorder::addOp(std::string name, const std::string& operands, const OpCost& cost) {
  if (cost.engine == Engine::kNone) return;
  events_.push_back({Stream::kCompute, cost.engine, cost.seconds});
  OpTotal& t = ops_[{name, operands}];
  if (t.calls == 0) {
    t.op = std::move(name);
    t.operands = operands;
    t.work = cost.work;
  }
  ++t.calls;
  t.seconds += cost.seconds;
  t.flops += cost.flops;
}

void StepRecorder::onOp(const ops::OpEvent& event) {
  if (!event.backward) {
    const OpPrice price = priceOp(model_, event.op, event.operands);
    std::string operands = describe(event.operands);
    if (event.op == "optimizer_step" || event.op == "optimizer_step_host") optimizer_seen_ = true;
    addOp(std::string(event.op), operands, price.forward);
    notePeak(fmt::format("{} {}", event.op, operands));
    forward_[event.id] = {price.backward, std::move(operands)};
    return;
  }
  backward_seen_ = true;
  const auto it = forward_.find(event.id);
  if (it == forward_.end()) {  // hooks (ZeRO-3's gathers) have no op of their own
    notePeak(std::string(event.op) + " (backward)");
    return;
  }
  const std::string name = std::string(event.op) + "_backward";
  addOp(name, it->second.operands, it->second.backward);
  notePeak(name + " " + it->second.operands);
}

void StepRecorder::onCollective(const comm::CollectiveRecord& record) {
  // A collective of one rank moves nothing and waits for nobody.
  const int ranks = record.groupSize > 0 ? record.groupSize : model_.topology().worldSize();
  if (ranks <= 1) {
    notePeak(record.description);
    return;
  }
  const double bytes = static_cast<double>(record.count) * static_cast<double>(comm::elementSize(record.dtype));
  const device::CollectiveKind kind = kindOf(record.kind);
  Stream stream = Stream::kBlocking;
  // Gradient reductions overlap the rest of backward: DDP's asynchronous
  // bucket all-reduces, ZeRO's reduce-scatters in the bucket hooks (as
  // DeepSpeed's overlap_comm). A tensor-parallel layer's all-reduce in
  // backward is synchronous: the next op needs its result.
  if ((record.async || kind == device::CollectiveKind::kReduceScatter) && backward_seen_ && !optimizer_seen_)
    stream = Stream::kOverlapped;
  else if (kind == device::CollectiveKind::kAllgather && !optimizer_seen_ && record.dtype != comm::DType::kByte)
    stream = Stream::kPrefetch;
  events_.push_back({stream, Engine::kNone, model_.collectiveSeconds(kind, bytes, record.groupSize, record.groupNodes),
                     model_.collectivePeers(record.groupSize, record.groupNodes)});
  notePeak(record.description);
}

StepTime StepRecorder::endStep(std::int64_t graphs) {
  StepTime t;
  // Two streams: compute's clock and the communication engine's.
  double compute = 0, comm = 0, last_issue = 0, overlapped_end = 0;
  for (const Event& e : events_) {
    switch (e.stream) {
      case Stream::kCompute:
        // Before the optimizer step, gradient reductions in flight finish.
        if (e.engine == Engine::kOptimizer || e.engine == Engine::kOffload) {
          t.breakdown.exposed_comm += std::max(0.0, overlapped_end - compute);
          compute = std::max(compute, overlapped_end);
        }
        compute += e.seconds;
        ++t.ops;
        switch (e.engine) {
          case Engine::kMatrix:
            t.breakdown.matrix += e.seconds;
            break;
          case Engine::kVector:
            t.breakdown.vector += e.seconds;
            break;
          case Engine::kOptimizer:
            t.breakdown.optimizer += e.seconds;
            break;
          case Engine::kOffload:
          case Engine::kHostLink:
            t.breakdown.offload += e.seconds;
            break;
          case Engine::kNone:
            break;
        }
        continue;
      case Stream::kOverlapped: {
        const double start = std::max(compute, comm);
        comm = start + e.seconds;
        overlapped_end = comm;
        break;
      }
      case Stream::kPrefetch: {
        const double start = std::max(last_issue, comm);
        last_issue = compute;
        comm = start + e.seconds;
        t.breakdown.exposed_comm += std::max(0.0, comm - compute);
        compute = std::max(compute, comm);
        break;
      }
      case Stream::kBlocking: {
        ++t.blocking_collectives;
        t.blocking_collective_peers += e.peers;
        const double start = std::max(compute, comm);
        comm = start + e.seconds;
        t.breakdown.exposed_comm += comm - compute;
        compute = comm;
        break;
      }
    }
    t.comm_seconds += e.seconds;
    ++t.collectives;
  }
  // Reductions still in flight at the end of the step (no optimizer step
  // to wait before, e.g. an accumulation step) finish before the next.
  t.breakdown.exposed_comm += std::max(0.0, overlapped_end - compute);
  t.breakdown.host = model_.hostSecondsPerGraph() * static_cast<double>(graphs);
  t.graphs = graphs;
  t.seconds = t.breakdown.total();
  last_ops_.clear();
  for (auto& [key, total] : ops_) {
    t.matrix_flops += total.flops;
    last_ops_.push_back(std::move(total));
  }
  std::sort(last_ops_.begin(), last_ops_.end(),
            [](const OpTotal& a, const OpTotal& b) { return a.seconds > b.seconds; });
  events_.clear();
  forward_.clear();
  ops_.clear();
  backward_seen_ = optimizer_seen_ = false;
  return t;
}

}  // namespace hpu::core::estimate
