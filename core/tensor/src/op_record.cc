#include "hpu/core/tensor/op_record.h"

#include "hpu/device/check.h"

namespace hpu::core::ops {
namespace {

thread_local std::vector<OpTraceEntry>* tls_trace = nullptr;
thread_local bool tls_graph_paused = false;
thread_local OpObserver* tls_observer = nullptr;
thread_local std::string_view tls_last_op;
thread_local std::uint64_t tls_op_count = 0;

}  // namespace

OpObserverScope::OpObserverScope(OpObserver* observer) : previous_(tls_observer) { tls_observer = observer; }
OpObserverScope::~OpObserverScope() { tls_observer = previous_; }
OpObserver* currentOpObserver() { return tls_observer; }

OpRecord::OpRecord(device::Device& device, device::OpName op, std::span<const device::OperandInfo> operands)
    : observer_(tls_observer), op_(op.name()), id_(++tls_op_count) {
  HPU_CHECK(operands.size() <= operands_.size(), "{} records {} operands", op_, operands.size());
  tls_last_op = op_;
  if (!tls_graph_paused) device.graph().recordOp(op, operands);
  if (tls_trace != nullptr)
    tls_trace->push_back({std::string(op_), operands.empty() ? device::DType::kFloat32 : operands[0].dtype});
  if (observer_ != nullptr) {
    count_ = operands.size();
    std::copy(operands.begin(), operands.end(), operands_.begin());
    begin_ = std::chrono::steady_clock::now();
  }
}

OpRecord::~OpRecord() {
  if (observer_ != nullptr)
    observer_->onOp({.op = op_,
                     .id = id_,
                     .operands = std::span<const device::OperandInfo>(operands_.data(), count_),
                     .begin = begin_,
                     .end = std::chrono::steady_clock::now()});
}

std::string_view lastRecordedOp() { return tls_last_op; }
std::uint64_t lastRecordedOpId() { return tls_op_count; }

OpTraceScope::OpTraceScope(std::vector<OpTraceEntry>& sink) : previous_(tls_trace) { tls_trace = &sink; }
OpTraceScope::~OpTraceScope() { tls_trace = previous_; }

GraphRecordingPause::GraphRecordingPause() : previous_(tls_graph_paused) { tls_graph_paused = true; }
GraphRecordingPause::~GraphRecordingPause() { tls_graph_paused = previous_; }

}  // namespace hpu::core::ops
