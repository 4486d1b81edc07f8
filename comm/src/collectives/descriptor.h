// What a collective is (kind, op, dtype, count, root, sequence number), how
// it is described in errors, and the fixed header every collective message
// carries so ranks detect disagreement instead of exchanging garbage.
//
// Wire header, 40 bytes, little-endian (all supported hosts are):
//   u32 magic 'HPUC' | u8 kind | u8 dtype | u8 op | u8 algorithm |
//   i32 root | u32 step | u64 count | u64 sequence | u32 length-of-name | u32 zero
// `step` numbers the messages of one collective between one pair of ranks;
// it is checked, and a mismatch with everything else equal is a bug.
// Thread-safety: plain values and pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "hpu/comm/buffer_view.h"
#include "hpu/comm/process_group.h"

namespace hpu::comm::detail {

enum class CollectiveKind : std::uint8_t { kAllreduce, kBroadcast, kAllgather, kReduceScatter, kBarrier, kAlltoall };

struct CollectiveDescriptor {
  CollectiveKind kind = CollectiveKind::kAllreduce;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;          // reductions only
  Algorithm algorithm = Algorithm::kAuto;  // the one chosen: allreduce's, or kHierarchical for the others
  std::int32_t root = 0;                 // broadcast only
  // Elements: the total buffer for allgather / reduceScatter; for alltoall
  // the elements this rank sends, and in a message the block of that pair.
  std::uint64_t count = 0;
  std::uint64_t sequence = 0;            // the group's n-th collective
  std::string name;                      // barrier only

  bool operator==(const CollectiveDescriptor&) const = default;
};

// "allreduce", "broadcast", "allgather", "reduce_scatter", "barrier", "alltoall".
std::string_view kindName(CollectiveKind kind);

// "allreduce #7 (sum, float32, 4097 elements, ring)", "barrier #9 'epoch_end'",
// "alltoall #4 (float32)" (its counts differ per pair: errors name them).
std::string describe(const CollectiveDescriptor& d);

inline constexpr std::size_t kHeaderBytes = 40;
using Header = std::array<std::byte, kHeaderBytes>;

// The header of message `step`, carrying `count` as the descriptor's (an
// alltoall's block); a barrier's name follows as payload.
Header encodeHeader(const CollectiveDescriptor& d, std::uint32_t step, std::uint64_t count);
inline Header encodeHeader(const CollectiveDescriptor& d, std::uint32_t step) { return encodeHeader(d, step, d.count); }

struct DecodedHeader {
  CollectiveDescriptor descriptor;  // name left empty; it is in the payload
  std::uint32_t step = 0;
  std::uint32_t nameBytes = 0;
};
// nullopt when `bytes` is too short, has the wrong magic or out-of-range enums.
std::optional<DecodedHeader> decodeHeader(std::span<const std::byte> bytes);

}  // namespace hpu::comm::detail
