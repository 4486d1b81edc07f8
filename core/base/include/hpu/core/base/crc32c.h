// CRC-32C (Castagnoli, polynomial 0x1EDC6F41 reflected), the checksum of
// TFRecord and LevelDB log framing, and its "masked" form that those
// formats store. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

namespace hpu::core {

// The CRC-32C of `bytes`, continuing from `crc` (the CRC of what came before;
// 0 to start).
std::uint32_t crc32c(std::string_view bytes, std::uint32_t crc = 0);

// TensorFlow's mask: rotate right by 15 bits and add 0xa282ead8, so that a
// CRC stored inside checksummed data does not checksum to a fixed value.
inline std::uint32_t maskCrc32c(std::uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace hpu::core
