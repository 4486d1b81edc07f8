// Byte-level encoding of control messages: little-endian integers and
// length-prefixed strings. The reader checks every length against what is
// left and against a cap, and reports malformed input as MalformedMessage;
// nothing a peer sends can make it read out of bounds.
// Thread-safety: one writer / reader per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "hpu/comm/errors.h"

namespace hpu::comm::detail {

// Input that does not decode. Caught where messages are received and turned
// into a log line (or a rejection); never escapes to a user.
class MalformedMessage : public CommError {
 public:
  using CommError::CommError;
};

class WireWriter {
 public:
  void u8(std::uint8_t v) { put(&v, sizeof v); }
  void u16(std::uint16_t v) { put(&v, sizeof v); }
  void u32(std::uint32_t v) { put(&v, sizeof v); }
  void u64(std::uint64_t v) { put(&v, sizeof v); }
  void i64(std::int64_t v) { put(&v, sizeof v); }
  void bytes(std::span<const std::uint8_t> v) { put(v.data(), v.size()); }
  // u32 length, then the bytes.
  void str(std::string_view v);

  const std::string& buffer() const { return buffer_; }
  std::string take() { return std::move(buffer_); }

 private:
  void put(const void* data, std::size_t size) { buffer_.append(static_cast<const char*>(data), size); }
  std::string buffer_;
};

class WireReader {
 public:
  explicit WireReader(std::span<const std::byte> data) : data_(data) {}

  std::uint8_t u8() { return get<std::uint8_t>(); }
  std::uint16_t u16() { return get<std::uint16_t>(); }
  std::uint32_t u32() { return get<std::uint32_t>(); }
  std::uint64_t u64() { return get<std::uint64_t>(); }
  std::int64_t i64() { return get<std::int64_t>(); }
  // Exactly `out.size()` bytes.
  void bytes(std::span<std::uint8_t> out);
  // A length-prefixed string of at most `maxBytes`.
  std::string str(std::size_t maxBytes);
  // How many bytes have been consumed so far, and how many are left.
  std::size_t position() const { return pos_; }
  std::size_t remaining() const { return data_.size() - pos_; }
  // MalformedMessage unless every byte was consumed.
  void expectEnd() const;

 private:
  template <class T>
  T get() {
    T value;
    take(&value, sizeof value);
    return value;
  }
  void take(void* out, std::size_t size);

  std::span<const std::byte> data_;
  std::size_t pos_ = 0;
};

}  // namespace hpu::comm::detail
