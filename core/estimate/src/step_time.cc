#include "hpu/core/estimate/step_time.h"

#include <algorithm>
#include <map>
#include <span>

#include "hpu/core/estimate/op_costs.h"

namespace hpu::core::estimate {
namespace {

OpPrice priceKind(const device::GaudiModel& model, const OpKind& kind) {
  std::vector<device::OperandInfo> operands;
  operands.reserve(kind.operands.size());
  for (const OpKind::Operand& o : kind.operands) operands.push_back({o.shape, o.dtype, o.requires_grad});
  return priceOp(model, kind.op, operands);
}

}  // namespace

PricedStep priceStep(const RecordedStep& step, const device::GaudiModel& model) {
  using Stream = RecordedStep::Stream;
  std::vector<OpPrice> prices;
  prices.reserve(step.op_kinds.size());
  for (const OpKind& kind : step.op_kinds) prices.push_back(priceKind(model, kind));

  StepTime t;
  std::map<std::pair<std::string, std::string>, OpTotal> totals;
  // Two streams: compute's clock and the communication engine's.
  double compute = 0, comm = 0, last_issue = 0, overlapped_end = 0;
  for (const RecordedStep::Event& e : step.events) {
    if (e.stream == Stream::kCompute) {
      const OpKind& kind = step.op_kinds[e.index];
      const OpCost& cost = e.backward ? prices[e.index].backward : prices[e.index].forward;
      if (cost.engine == Engine::kNone) continue;
      OpTotal& total = totals[{e.backward ? kind.op + "_backward" : kind.op, kind.description}];
      if (total.calls == 0) {
        total.op = e.backward ? kind.op + "_backward" : kind.op;
        total.operands = kind.description;
        total.work = cost.work;
      }
      ++total.calls;
      total.seconds += cost.seconds;
      total.flops += cost.flops;
      // Before the optimizer step, gradient reductions in flight finish.
      if (cost.engine == Engine::kOptimizer || cost.engine == Engine::kOffload) {
        t.breakdown.exposed_comm += std::max(0.0, overlapped_end - compute);
        compute = std::max(compute, overlapped_end);
      }
      compute += cost.seconds;
      ++t.ops;
      switch (cost.engine) {
        case Engine::kMatrix:
          t.breakdown.matrix += cost.seconds;
          break;
        case Engine::kVector:
          t.breakdown.vector += cost.seconds;
          break;
        case Engine::kOptimizer:
          t.breakdown.optimizer += cost.seconds;
          break;
        case Engine::kOffload:
        case Engine::kHostLink:
          t.breakdown.offload += cost.seconds;
          break;
        case Engine::kNone:
          break;
      }
      continue;
    }
    const RecordedCollective& c = step.collectives[e.index];
    const int ranks = c.group_size > 0 ? c.group_size : model.topology().worldSize();
    if (ranks <= 1) continue;
    const double seconds = model.collectiveSeconds(c.kind, c.bytes, c.group_size, c.group_nodes);
    switch (e.stream) {
      case Stream::kOverlapped: {
        const double start = std::max(compute, comm);
        comm = start + seconds;
        overlapped_end = comm;
        break;
      }
      case Stream::kPrefetch: {
        const double start = std::max(last_issue, comm);
        last_issue = compute;
        comm = start + seconds;
        t.breakdown.exposed_comm += std::max(0.0, comm - compute);
        compute = std::max(compute, comm);
        break;
      }
      case Stream::kBlocking: {
        ++t.blocking_collectives;
        t.blocking_collective_peers += model.collectivePeers(c.group_size, c.group_nodes);
        const double start = std::max(compute, comm);
        comm = start + seconds;
        t.breakdown.exposed_comm += comm - compute;
        if (c.kind == device::CollectiveKind::kBroadcast && c.group_size == 2) t.pipeline_transfers += comm - compute;
        compute = comm;
        break;
      }
      case Stream::kCompute:
        break;
    }
    t.comm_seconds += seconds;
    ++t.collectives;
  }
  // Reductions still in flight at the end of the step (no optimizer step
  // to wait before, e.g. an accumulation step) finish before the next.
  t.breakdown.exposed_comm += std::max(0.0, overlapped_end - compute);
  t.breakdown.host = model.hostSecondsPerGraph() * static_cast<double>(step.graphs);
  t.graphs = step.graphs;
  t.seconds = t.breakdown.total();
  PricedStep out{t, {}};
  for (auto& [key, total] : totals) {
    out.time.matrix_flops += total.flops;
    out.ops.push_back(std::move(total));
  }
  std::sort(out.ops.begin(), out.ops.end(), [](const OpTotal& a, const OpTotal& b) { return a.seconds > b.seconds; });
  return out;
}

}  // namespace hpu::core::estimate
