#include "descriptor.h"

#include <bit>
#include <cstring>

#include <spdlog/fmt/fmt.h>

namespace hpu::comm::detail {
namespace {

static_assert(std::endian::native == std::endian::little, "the collective wire format assumes little-endian hosts");

constexpr std::uint32_t kMagic = 0x43555048;  // "HPUC"

std::string_view algorithmName(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kAuto: return "auto";
    case Algorithm::kRing: return "ring";
    case Algorithm::kRecursiveDoubling: return "recursive doubling";
    case Algorithm::kHierarchical: return "hierarchical";
    case Algorithm::kHalvingDoubling: return "halving-doubling";
  }
  return "unknown algorithm";
}

template <class T>
void put(Header& h, std::size_t offset, T value) {
  std::memcpy(h.data() + offset, &value, sizeof value);
}

template <class T>
T get(std::span<const std::byte> bytes, std::size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof value);
  return value;
}

}  // namespace

std::string_view kindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllreduce: return "allreduce";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kAllgather: return "allgather";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kBarrier: return "barrier";
    case CollectiveKind::kAlltoall: return "alltoall";
  }
  return "unknown collective";
}

std::string describe(const CollectiveDescriptor& d) {
  const auto kind = kindName(d.kind);
  const auto dtype = dtypeName(d.dtype);
  switch (d.kind) {
    case CollectiveKind::kAllreduce:
      return fmt::format("{} #{} ({}, {}, {} elements, {})", kind, d.sequence, reduceOpName(d.op), dtype, d.count,
                         algorithmName(d.algorithm));
    case CollectiveKind::kBroadcast:
      return fmt::format("{} #{} (root {}, {}, {} elements)", kind, d.sequence, d.root, dtype, d.count);
    case CollectiveKind::kAllgather:
      return fmt::format("{} #{} ({}, {} elements)", kind, d.sequence, dtype, d.count);
    case CollectiveKind::kReduceScatter:
      return fmt::format("{} #{} ({}, {}, {} elements)", kind, d.sequence, reduceOpName(d.op), dtype, d.count);
    case CollectiveKind::kBarrier:
      return fmt::format("{} #{} '{}'", kind, d.sequence, d.name);
    case CollectiveKind::kAlltoall:
      return fmt::format("{} #{} ({})", kind, d.sequence, dtype);
  }
  return fmt::format("{} #{}", kind, d.sequence);
}

Header encodeHeader(const CollectiveDescriptor& d, std::uint32_t step, std::uint64_t count) {
  Header h{};
  put(h, 0, kMagic);
  put(h, 4, static_cast<std::uint8_t>(d.kind));
  put(h, 5, static_cast<std::uint8_t>(d.dtype));
  put(h, 6, static_cast<std::uint8_t>(d.op));
  put(h, 7, static_cast<std::uint8_t>(d.algorithm));
  put(h, 8, d.root);
  put(h, 12, step);
  put(h, 16, count);
  put(h, 24, d.sequence);
  put(h, 32, static_cast<std::uint32_t>(d.name.size()));
  return h;
}

std::optional<DecodedHeader> decodeHeader(std::span<const std::byte> bytes) {
  if (bytes.size() < kHeaderBytes || get<std::uint32_t>(bytes, 0) != kMagic) return std::nullopt;
  const auto kind = get<std::uint8_t>(bytes, 4);
  const auto dtype = get<std::uint8_t>(bytes, 5);
  const auto op = get<std::uint8_t>(bytes, 6);
  const auto algorithm = get<std::uint8_t>(bytes, 7);
  if (kind > static_cast<std::uint8_t>(CollectiveKind::kAlltoall) || dtype > static_cast<std::uint8_t>(DType::kByte) ||
      op > static_cast<std::uint8_t>(ReduceOp::kMax) ||
      algorithm > static_cast<std::uint8_t>(Algorithm::kHalvingDoubling)) {
    return std::nullopt;
  }
  DecodedHeader out;
  out.descriptor.kind = static_cast<CollectiveKind>(kind);
  out.descriptor.dtype = static_cast<DType>(dtype);
  out.descriptor.op = static_cast<ReduceOp>(op);
  out.descriptor.algorithm = static_cast<Algorithm>(algorithm);
  out.descriptor.root = get<std::int32_t>(bytes, 8);
  out.step = get<std::uint32_t>(bytes, 12);
  out.descriptor.count = get<std::uint64_t>(bytes, 16);
  out.descriptor.sequence = get<std::uint64_t>(bytes, 24);
  out.nameBytes = get<std::uint32_t>(bytes, 32);
  return out;
}

}  // namespace hpu::comm::detail
