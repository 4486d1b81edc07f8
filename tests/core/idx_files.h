// Writing IDX files (plain and gzipped) for the data tests.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace hpu::core::data {

// An unsigned-byte IDX file: magic 0x000008<ndim>, big-endian dims, data.
inline std::string idxBytes(int ndim, const std::vector<std::uint32_t>& dims, const std::vector<std::uint8_t>& data) {
  std::string out = {0, 0, 0x08, static_cast<char>(ndim)};
  for (std::uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((d >> shift) & 0xff));
  out.append(data.begin(), data.end());
  return out;
}

// n bytes 0, 37, 74, ... (mod 256).
inline std::vector<std::uint8_t> idxPattern(std::size_t n) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>((i * 37) % 256);
  return v;
}

inline void writeGzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("cannot write " + path);
  const int written = gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  if (gzclose(f) != Z_OK || written != static_cast<int>(bytes.size()))
    throw std::runtime_error("cannot write " + path);
}

}  // namespace hpu::core::data
