// The IDX file format of MNIST-style data sets (big-endian header: two zero
// bytes, a type byte 0x08 for unsigned bytes, the number of dimensions, then
// one uint32 per dimension, then the data). Gzipped files are read
// transparently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpu::core::data {

struct IdxArray {
  std::vector<std::int64_t> dims;
  std::vector<std::uint8_t> data;
};

// Reads an unsigned-byte IDX file with `expected_ndim` dimensions. Throws
// DataError naming the path and what was expected ("bad IDX magic 0x... in
// <path>: expected 0x00000803 ...", "truncated ...").
IdxArray readIdx(const std::string& path, int expected_ndim);

}  // namespace hpu::core::data
