// One emulated HPU: its identity (logical index hpu:N, module id), its
// generation's spec, its memory (Allocator) and its graph bookkeeping
// (GraphRuntime). Devices are created by a Platform (or directly in tests),
// never copied or moved: buffers refer to their device.
//
// Thread-safety: identity and spec are immutable; allocator() is
// thread-safe; graph() belongs to the thread driving this device.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "hpu/device/allocator.h"
#include "hpu/device/graph.h"
#include "hpu/device/spec.h"

namespace hpu::device {

class RecipeDiskCache;

struct DeviceOptions {
  MemoryLimit memoryLimit;  // see memoryLimitOf() in emulator.h
  ExecutionMode mode = ExecutionMode::kLazy;
  std::shared_ptr<RecipeDiskCache> recipeDiskCache = nullptr;  // optional, shared
  // Tensors carry shapes, dtypes and memory accounting but no host storage
  // (see Allocator): a model of any size can be traced, nothing computed.
  bool shapeOnly = false;
};

class Device {
 public:
  Device(int index, int moduleId, Generation generation, DeviceOptions options);
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  int index() const { return index_; }          // N in hpu:N
  int moduleId() const { return moduleId_; }    // the module on the emulated node
  const std::string& name() const { return name_; }  // "hpu:N"
  const DeviceSpec& spec() const { return spec_; }
  // Buffers have no host storage; ops record, allocate and free, but compute nothing.
  bool shapeOnly() const { return shapeOnly_; }

  Allocator& allocator() { return allocator_; }
  const Allocator& allocator() const { return allocator_; }
  GraphRuntime& graph() { return graph_; }
  const GraphRuntime& graph() const { return graph_; }

  // Throws UnsupportedDTypeError naming this device if its generation cannot
  // hold t.
  void requireSupported(DType t) const;

 private:
  int index_;
  int moduleId_;
  std::string name_;
  const DeviceSpec& spec_;
  bool shapeOnly_;
  Allocator allocator_;
  GraphRuntime graph_;
};

}  // namespace hpu::device
