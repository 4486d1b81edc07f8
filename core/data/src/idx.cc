#include "hpu/core/data/idx.h"

#include <spdlog/fmt/fmt.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "hpu/core/base/errors.h"

namespace hpu::core::data {
namespace {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

// Reads up to n bytes; returns how many were available. Throws on a corrupt
// gzip stream.
std::size_t readFully(gzFile f, void* dst, std::size_t n, const std::string& path) {
  std::size_t done = 0;
  auto* out = static_cast<unsigned char*>(dst);
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - done, 1u << 30));
    const int got = gzread(f, out + done, chunk);
    if (got < 0) {
      int err = Z_OK;
      throw DataError(fmt::format("{} is a corrupt gzip file: {}", path, gzerror(f, &err)));
    }
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  return done;
}

std::uint32_t bigEndian(const unsigned char* b) {
  return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | b[3];
}

}  // namespace

IdxArray readIdx(const std::string& path, int expected_ndim) {
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (!f) throw DataError(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  unsigned char magic[4];
  const std::uint32_t expected_magic = 0x00000800u | static_cast<std::uint32_t>(expected_ndim);
  if (readFully(f.get(), magic, 4, path) != 4)
    throw DataError(
        fmt::format("{} is empty or truncated: expected an IDX header (magic 0x{:08x})", path, expected_magic));
  const std::uint32_t got_magic = bigEndian(magic);
  if (got_magic != expected_magic)
    throw DataError(
        fmt::format("bad IDX magic 0x{:08x} in {}: expected 0x{:08x} (unsigned bytes, {} dimensions); is it an "
                    "MNIST-format {} file?",
                    got_magic, path, expected_magic, expected_ndim, expected_ndim == 1 ? "labels" : "images"));
  IdxArray out;
  std::uint64_t total = 1;
  for (int d = 0; d < expected_ndim; ++d) {
    unsigned char b[4];
    if (readFully(f.get(), b, 4, path) != 4)
      throw DataError(fmt::format("{} is truncated inside its IDX header", path));
    out.dims.push_back(bigEndian(b));
    total *= bigEndian(b);
  }
  if (total > (std::uint64_t{1} << 34))
    throw DataError(fmt::format("{}: IDX header announces {} bytes of data; refusing", path, total));
  out.data.resize(static_cast<std::size_t>(total));
  const std::size_t got = readFully(f.get(), out.data.data(), out.data.size(), path);
  if (got != out.data.size())
    throw DataError(
        fmt::format("{} is truncated: the header announces {} bytes of data, the file has {}", path, total, got));
  unsigned char extra;
  if (readFully(f.get(), &extra, 1, path) != 0)
    throw DataError(fmt::format("{} has data past the {} bytes its IDX header announces", path, total));
  return out;
}

}  // namespace hpu::core::data
