// A safetensors file of any writer (Hugging Face's model.safetensors and its
// shards, our checkpoints), mapped read-only: the header is parsed at open,
// each tensor's bytes stay in the mapping until copied into a destination,
// converted to float on the way (no second copy of the file in host memory;
// the pages a reader never touches are never read from disk).
// The checksum our checkpoints carry is not verified here (decodeSafetensors
// does). Immutable after open: thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hpu/device/dtype.h"

namespace hpu::core::checkpoint {

struct SafetensorsTensor {
  std::string name;
  device::DType dtype = device::DType::kFloat32;  // F32, BF16, F16 or I64
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte offsets in the data section
  std::int64_t numel() const;
};

class SafetensorsFile {
 public:
  // Maps `path` and parses its header. With `header_only`, only the header
  // is read (what estimate needs) and copy() may not be called. Throws
  // CheckpointError naming the file for an unreadable or malformed one.
  static std::shared_ptr<const SafetensorsFile> open(const std::string& path, bool header_only = false);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // In the file's header order.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Elements [first, first + out.size()) of floating tensor `t`, as floats
  // (bf16 and f16 widened exactly). REQUIRES: t is this file's, floating,
  // and the range lies inside it.
  void copy(const SafetensorsTensor& t, std::int64_t first, std::span<float> out) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  const unsigned char* map_ = nullptr;
  std::size_t map_size_ = 0;
  std::size_t data_begin_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Parses a safetensors header (the JSON text) for a data section of
// `data_size` bytes: its tensors in the header's order, and its metadata
// strings into `metadata`. Throws CheckpointError "<origin> is not a valid
// <kind>: ...".
std::vector<SafetensorsTensor> parseSafetensorsHeader(std::string_view text, std::uint64_t data_size,
                                                      const std::string& origin,
                                                      std::map<std::string, std::string>& metadata,
                                                      std::string_view kind = "safetensors file");
// The header length from the first 8 bytes of a file of `file_size` bytes.
std::uint64_t safetensorsHeaderLength(std::string_view first8, std::uint64_t file_size, const std::string& origin,
                                      std::string_view kind = "safetensors file");
// Widens `out.size()` stored elements of `dtype` at `src` to floats.
void widenToFloat(device::DType dtype, const unsigned char* src, std::span<float> out);

}  // namespace hpu::core::checkpoint
