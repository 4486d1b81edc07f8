// bfloat16 on the wire: float values rounded to bfloat16 bits and back.
// Spans without data (a shape-only device's) convert nothing; their views
// have a count and no data, which simulated process groups accept.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hpu/comm/buffer_view.h"
#include "hpu/comm/process_group.h"
#include "hpu/device/dtype.h"
#include "hpu/device/numerics.h"

namespace hpu::core::wire {

inline void toBits(std::span<const float> values, std::vector<std::uint16_t>& bits) {
  bits.resize(values.data() != nullptr ? values.size() : 0);
  for (std::size_t j = 0; j < bits.size(); ++j) bits[j] = device::toBFloat16Bits(values[j]);
}

inline void fromBits(const std::vector<std::uint16_t>& bits, std::span<float> values) {
  for (std::size_t j = 0; j < bits.size() && j < values.size(); ++j) values[j] = device::fromBFloat16Bits(bits[j]);
}

// `count` bfloat16 elements held by `bits` (none on a shape-only device).
inline comm::BufferView bitsView(std::vector<std::uint16_t>& bits, std::size_t count) {
  return comm::BufferView::bfloat16(std::span<std::uint16_t>(bits.empty() ? nullptr : bits.data(), count));
}

// Parameter values all-gathered over `group` in their dtype: bf16 as its
// bits, anything else as fp32. `mine` must not overlap `all`.
inline void allgatherValues(comm::ProcessGroup& group, std::span<const float> mine, std::span<float> all,
                            device::DType dtype) {
  if (dtype != device::DType::kBFloat16) {
    group.allgather(comm::ConstBufferView(mine), all);
    return;
  }
  std::vector<std::uint16_t> in, out(all.data() != nullptr ? all.size() : 0);
  toBits(mine, in);
  group.allgather(bitsView(in, mine.size()), bitsView(out, all.size()));
  fromBits(out, all.data() != nullptr ? all : std::span<float>());
}

}  // namespace hpu::core::wire
