// A zero-initialised buffer of float values (rounded to its dtype) that
// lives on the device, or in host memory when offloaded (ZeRO-Offload):
// optimizer state, and ZeRO's gradient and parameter shards. On the device it
// is a tensor of its dtype, so the device's memory statistics account for it;
// in host memory the device holds none of it.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hpu/core/tensor/tensor.h"

namespace hpu::core::optim {

class StateBuffer {
 public:
  StateBuffer() = default;
  StateBuffer(device::Device& device, std::int64_t size, bool on_host, DType dtype = DType::kFloat32);

  // Null on a shape-only device.
  float* data() { return device_.defined() ? device_.data() : (host_.empty() ? nullptr : host_.data()); }
  std::size_t size() const { return size_; }
  std::span<float> values() { return {data(), size()}; }
  bool onHost() const { return !device_.defined(); }
  DType dtype() const { return dtype_; }

 private:
  Tensor device_;
  std::vector<float> host_;  // empty on a shape-only device
  std::size_t size_ = 0;
  DType dtype_ = DType::kFloat32;
};

}  // namespace hpu::core::optim
