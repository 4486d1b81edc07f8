// libFuzzer target: a checkpoint file as `--ckpt_path` reads it: the
// safetensors header (JSON), its metadata and the tensor table against the
// file's bytes. Bad files must come back as CheckpointError naming the file.
// The harness stamps the right CRC-32 into an input's checksum field, if it
// has one, so that mutations reach the parser behind the checksum.
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "hpu/core/base/errors.h"
#include "hpu/core/checkpoint/checkpoint.h"

namespace {

void stampChecksum(std::string& bytes) {
  const std::string field = "\"hpu_train.crc32\":\"";
  const std::size_t at = bytes.find(field);
  if (at == std::string::npos || at + field.size() + 8 > bytes.size()) return;
  const std::size_t digits = at + field.size();
  bytes.replace(digits, 8, "00000000");
  const auto crc = static_cast<std::uint32_t>(
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", crc);
  bytes.replace(digits, 8, hex);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  stampChecksum(bytes);
  try {
    hpu::core::checkpoint::decodeSafetensors(bytes, "fuzz.ckpt");
  } catch (const hpu::core::CheckpointError&) {
  }
  return 0;
}
