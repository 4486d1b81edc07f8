#include "hpu/core/estimate/step_recorder.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/fmt/ranges.h>

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

StepRecorder::StepRecorder(device::Device& device) : device_(device) {}

void StepRecorder::notePeak(const std::string& where) {
  const std::uint64_t peak = device_.allocator().stats().maxInUse;
  if (peak > peak_bytes_) {
    peak_bytes_ = peak;
    peak_at_ = where;
  }
}

void StepRecorder::onOp(const ops::OpEvent& event) {
  if (!event.backward) {
    std::string operands = describe(event.operands);
    // Operands that print alike may differ in which gradients backward computes.
    std::string key = fmt::format("{}\n{}\n", event.op, operands);
    for (const device::OperandInfo& o : event.operands) key += o.requires_grad ? '1' : '0';
    const auto [it, added] = kinds_.try_emplace(std::move(key), static_cast<std::uint32_t>(step_.op_kinds.size()));
    if (added) {
      OpKind kind{std::string(event.op), {}, operands};
      for (const device::OperandInfo& o : event.operands)
        kind.operands.push_back({{o.shape.begin(), o.shape.end()}, o.dtype, o.requires_grad});
      step_.op_kinds.push_back(std::move(kind));
    }
    if (event.op == "optimizer_step" || event.op == "optimizer_step_host") optimizer_seen_ = true;
    step_.events.push_back({RecordedStep::Stream::kCompute, false, it->second});
    notePeak(fmt::format("{} {}", event.op, operands));
    forward_kind_[event.id] = it->second;
    return;
  }
  backward_seen_ = true;
  const auto it = forward_kind_.find(event.id);
  if (it == forward_kind_.end()) {  // hooks (ZeRO-3's gathers) have no op of their own
    notePeak(std::string(event.op) + " (backward)");
    return;
  }
  step_.events.push_back({RecordedStep::Stream::kCompute, true, it->second});
  notePeak(fmt::format("{}_backward {}", event.op, step_.op_kinds[it->second].description));
}

void StepRecorder::onCollective(const comm::CollectiveRecord& record) {
  const device::CollectiveKind kind = kindOf(record.kind);
  RecordedStep::Stream stream = RecordedStep::Stream::kBlocking;
  // Gradient reductions overlap the rest of backward: DDP's asynchronous
  // bucket all-reduces, ZeRO's reduce-scatters in the bucket hooks (as
  // DeepSpeed's overlap_comm). A tensor-parallel layer's all-reduce in
  // backward is synchronous: the next op needs its result.
  if ((record.async || kind == device::CollectiveKind::kReduceScatter) && backward_seen_ && !optimizer_seen_)
    stream = RecordedStep::Stream::kOverlapped;
  else if (kind == device::CollectiveKind::kAllgather && !optimizer_seen_ && record.dtype != comm::DType::kByte)
    stream = RecordedStep::Stream::kPrefetch;
  const double bytes = static_cast<double>(record.count) * static_cast<double>(comm::elementSize(record.dtype));
  step_.events.push_back({stream, false, static_cast<std::uint32_t>(step_.collectives.size())});
  step_.collectives.push_back({kind, bytes, record.groupSize, record.groupNodes});
  notePeak(record.description);
}

RecordedStep StepRecorder::endStep(std::int64_t graphs) {
  RecordedStep out = std::move(step_);
  out.graphs = graphs;
  step_ = {};
  kinds_.clear();
  forward_kind_.clear();
  backward_seen_ = optimizer_seen_ = false;
  return out;
}

}  // namespace hpu::core::estimate
