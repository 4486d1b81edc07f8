#include "hpu/core/checkpoint/safetensors_file.h"

#include <fcntl.h>
#include <spdlog/fmt/fmt.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "hpu/core/base/errors.h"
#include "hpu/core/base/json_number.h"
#include "hpu/device/check.h"
#include "hpu/device/numerics.h"

namespace hpu::core::checkpoint {
namespace {

using device::DType;
using nlohmann::json;

constexpr std::uint64_t kMaxHeader = 100u << 20;

CheckpointError invalid(const std::string& origin, std::string_view kind, const std::string& why) {
  return CheckpointError(fmt::format("{} is not a valid {}: {}", origin, kind, why));
}

std::optional<DType> fromSafetensors(const std::string& s) {
  if (s == "F32") return DType::kFloat32;
  if (s == "BF16") return DType::kBFloat16;
  if (s == "F16") return DType::kFloat16;
  if (s == "I64") return DType::kInt64;
  return std::nullopt;
}

std::uint64_t widthOf(DType t) { return t == DType::kFloat32 ? 4 : t == DType::kInt64 ? 8 : 2; }

}  // namespace

std::int64_t SafetensorsTensor::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::uint64_t safetensorsHeaderLength(std::string_view first8, std::uint64_t file_size, const std::string& origin,
                                      std::string_view kind) {
  if (first8.size() < 8)
    throw invalid(origin, kind, fmt::format("{} bytes is shorter than the 8-byte header length", first8.size()));
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<std::uint64_t>(static_cast<unsigned char>(first8[static_cast<std::size_t>(i)])) << (8 * i);
  if (n > kMaxHeader || 8 + n > file_size)
    throw invalid(origin, kind, fmt::format("header length {} exceeds the file's {} bytes (truncated?)", n, file_size));
  return n;
}

std::vector<SafetensorsTensor> parseSafetensorsHeader(std::string_view text, std::uint64_t data_size,
                                                      const std::string& origin,
                                                      std::map<std::string, std::string>& metadata,
                                                      std::string_view kind) {
  json header;
  try {
    header = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw invalid(origin, kind, std::string("corrupt header: ") + e.what());
  }
  if (!header.is_object()) throw invalid(origin, kind, "header is not a JSON object");
  // The metadata first, whatever the keys' order: a caller may check a
  // checksum in it before trusting the tensor table.
  if (const auto it = header.find("__metadata__"); it != header.end() && !it->is_null()) {
    if (!it->is_object()) throw invalid(origin, kind, "__metadata__ is not an object");
    for (const auto& [k, v] : it->items()) {
      if (!v.is_string()) throw invalid(origin, kind, "metadata '" + k + "' is not a string");
      metadata[k] = v.get<std::string>();
    }
  }
  std::vector<SafetensorsTensor> out;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    try {
      SafetensorsTensor t;
      t.name = name;
      const auto dt = fromSafetensors(info.at("dtype").get<std::string>());
      if (!dt)
        throw invalid(origin, kind, fmt::format("tensor '{}' has dtype {}; F32, BF16, F16 and I64 are supported", name,
                                          info.at("dtype").dump()));
      t.dtype = *dt;
      const auto shape = jsonIntegers<std::int64_t>(info.at("shape"));
      if (!shape)
        throw invalid(origin, kind, fmt::format("tensor '{}' has shape {} (not a list of integers)", name,
                                                info.at("shape").dump()));
      t.shape = *shape;
      // A shape's element count may not overflow (an empty tensor has none).
      const bool empty = std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end();
      std::uint64_t elements = 1;
      for (auto d : t.shape)
        if (d < 0 || (!empty && (__builtin_mul_overflow(elements, static_cast<std::uint64_t>(d), &elements) ||
                                 elements > data_size)))
          throw invalid(origin, kind,
                        fmt::format("tensor '{}' has shape {} (more elements than the {} data bytes hold)", name,
                                    info.at("shape").dump(), data_size));
      const auto offsets = jsonIntegers<std::uint64_t>(info.at("data_offsets")).value_or(std::vector<std::uint64_t>{});
      if (offsets.size() != 2 || offsets[1] < offsets[0] || offsets[1] > data_size ||
          offsets[1] - offsets[0] != static_cast<std::uint64_t>(t.numel()) * widthOf(t.dtype))
        throw invalid(origin, kind, fmt::format("tensor '{}' has data offsets {} outside the {} data bytes or not "
                                          "matching its shape",
                                          name, info.at("data_offsets").dump(), data_size));
      t.begin = offsets[0];
      t.end = offsets[1];
      out.push_back(std::move(t));
    } catch (const json::exception& e) {
      throw invalid(origin, kind, "tensor '" + name + "': " + e.what());
    }
  }
  return out;
}

void widenToFloat(DType dtype, const unsigned char* src, std::span<float> out) {
  switch (dtype) {
    case DType::kFloat32:
      if (!out.empty()) std::memcpy(out.data(), src, out.size() * 4);
      return;
    case DType::kBFloat16:
      for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = device::fromBFloat16Bits(static_cast<std::uint16_t>(src[2 * i] | (src[2 * i + 1] << 8)));
      return;
    case DType::kFloat16:
      for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = device::fromFloat16Bits(static_cast<std::uint16_t>(src[2 * i] | (src[2 * i + 1] << 8)));
      return;
    default: HPU_CHECK(false, "widenToFloat of a {} tensor", device::dtypeName(dtype));
  }
}

std::shared_ptr<const SafetensorsFile> SafetensorsFile::open(const std::string& path, bool header_only) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw CheckpointError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  struct stat st {};
  const auto fail = [&](const std::string& why) {
    const int err = errno;
    ::close(fd);
    return CheckpointError(fmt::format("cannot read {}: {} ({})", path, why, std::strerror(err)));
  };
  if (::fstat(fd, &st) != 0) throw fail("fstat");
  const auto size = static_cast<std::uint64_t>(st.st_size);
  std::string head(static_cast<std::size_t>(std::min<std::uint64_t>(size, 8)), '\0');
  if (::pread(fd, head.data(), head.size(), 0) != static_cast<ssize_t>(head.size())) throw fail("read");
  std::uint64_t n = 0;
  try {
    n = safetensorsHeaderLength(head, size, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  f->data_begin_ = static_cast<std::size_t>(8 + n);
  if (header_only) {
    std::string text(static_cast<std::size_t>(n), '\0');
    if (::pread(fd, text.data(), text.size(), 8) != static_cast<ssize_t>(text.size())) throw fail("read");
    ::close(fd);
    f->tensors_ = parseSafetensorsHeader(text, size - 8 - n, path, f->metadata_);
  } else {
    void* map = size == 0 ? nullptr : ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) throw fail("mmap");
    ::close(fd);
    f->map_ = static_cast<const unsigned char*>(map);
    f->map_size_ = static_cast<std::size_t>(size);
    f->tensors_ = parseSafetensorsHeader(
        std::string_view(reinterpret_cast<const char*>(f->map_) + 8, static_cast<std::size_t>(n)), size - 8 - n,
        path, f->metadata_);
  }
  for (std::size_t i = 0; i < f->tensors_.size(); ++i) f->index_[f->tensors_[i].name] = i;
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(const_cast<unsigned char*>(map_), map_size_);
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::copy(const SafetensorsTensor& t, std::int64_t first, std::span<float> out) const {
  HPU_CHECK(map_ != nullptr || out.empty(), "{}: copy from a header-only safetensors file", path_);
  HPU_CHECK(first >= 0 && first + static_cast<std::int64_t>(out.size()) <= t.numel(), "{}: '{}' has {} elements",
            path_, t.name, t.numel());
  widenToFloat(t.dtype, map_ + data_begin_ + t.begin + static_cast<std::uint64_t>(first) * widthOf(t.dtype), out);
}

}  // namespace hpu::core::checkpoint
