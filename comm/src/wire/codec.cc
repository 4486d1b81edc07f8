#include "codec.h"

#include <cstring>

#include <spdlog/fmt/fmt.h>

namespace hpu::comm::detail {

void WireWriter::str(std::string_view v) {
  u32(static_cast<std::uint32_t>(v.size()));
  put(v.data(), v.size());
}

void WireReader::take(void* out, std::size_t size) {
  if (data_.size() - pos_ < size) {
    throw MalformedMessage(fmt::format("truncated: needs {} more bytes at offset {} of {}", size, pos_, data_.size()));
  }
  if (size != 0) std::memcpy(out, data_.data() + pos_, size);
  pos_ += size;
}

void WireReader::bytes(std::span<std::uint8_t> out) { take(out.data(), out.size()); }

std::string WireReader::str(std::size_t maxBytes) {
  const std::uint32_t size = u32();
  if (size > maxBytes) throw MalformedMessage(fmt::format("a string of {} bytes exceeds the cap of {}", size, maxBytes));
  std::string out(size, '\0');
  take(out.data(), size);
  return out;
}

void WireReader::expectEnd() const {
  if (pos_ != data_.size()) {
    throw MalformedMessage(fmt::format("{} unexpected trailing bytes", data_.size() - pos_));
  }
}

}  // namespace hpu::comm::detail
