// How an op announces itself: every device op (the functional ops, the
// trainer's host-to-device copies, fp8 GEMMs) constructs an OpRecord while it
// runs. The record enters the op in its device's lazy-mode graph, in the
// thread's op-dtype trace (OpTraceScope) and, when the thread has an
// OpObserver (a profiler's device track), reports the op's extent: from the
// record's construction to its destruction.
//
// Thread-safety: the trace, the observer and the graph pause are per thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hpu/device/device.h"
#include "hpu/device/graph.h"

namespace hpu::core::ops {

struct OpEvent {
  std::string_view op;                            // "linear"; backward functions: the op that recorded them
  bool backward = false;                          // a backward function run by the tape
  // Forward ops: this op's number on its thread (from 1); backward
  // functions: the number of the forward op that recorded them (0: none).
  std::uint64_t id = 0;
  std::span<const device::OperandInfo> operands{};  // forward ops only
  std::chrono::steady_clock::time_point begin{}, end{};
};

class OpObserver {
 public:
  virtual ~OpObserver() = default;
  virtual void onOp(const OpEvent& event) = 0;
};

// Makes `observer` (or nullptr) the thread's observer for its lifetime.
class OpObserverScope {
 public:
  explicit OpObserverScope(OpObserver* observer);
  ~OpObserverScope();
  OpObserverScope(const OpObserverScope&) = delete;
  OpObserverScope& operator=(const OpObserverScope&) = delete;

 private:
  OpObserver* previous_;
};
OpObserver* currentOpObserver();

class [[nodiscard]] OpRecord {
 public:
  // REQUIRES: at most 4 operands, whose shapes outlive the record.
  OpRecord(device::Device& device, device::OpName op, std::span<const device::OperandInfo> operands);
  ~OpRecord();
  OpRecord(const OpRecord&) = delete;
  OpRecord& operator=(const OpRecord&) = delete;

 private:
  OpObserver* observer_;
  std::string_view op_;
  std::array<device::OperandInfo, 4> operands_{};
  std::size_t count_ = 0;
  std::uint64_t id_;
  std::chrono::steady_clock::time_point begin_;
};

// The op whose OpRecord was constructed last on this thread ("" before any):
// the name backward functions are traced under, and its number (OpEvent::id).
std::string_view lastRecordedOp();
std::uint64_t lastRecordedOpId();

// Records (op, dtype it ran in) for every op on this thread while alive:
// makes autocast decisions observable (tests, debugging).
struct OpTraceEntry {
  std::string op;
  device::DType dtype;
};
class OpTraceScope {
 public:
  explicit OpTraceScope(std::vector<OpTraceEntry>& sink);
  ~OpTraceScope();
  OpTraceScope(const OpTraceScope&) = delete;
  OpTraceScope& operator=(const OpTraceScope&) = delete;

 private:
  std::vector<OpTraceEntry>* previous_;
};

// Ops run while one is alive are not recorded in the device's lazy graph
// (a dry run, e.g. for the model summary's output shapes).
class GraphRecordingPause {
 public:
  GraphRecordingPause();
  ~GraphRecordingPause();
  GraphRecordingPause(const GraphRecordingPause&) = delete;
  GraphRecordingPause& operator=(const GraphRecordingPause&) = delete;

 private:
  bool previous_;
};

}  // namespace hpu::core::ops
