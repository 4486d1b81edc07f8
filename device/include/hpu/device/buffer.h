// Buffer: the storage of one device tensor, an RAII handle on a block from its
// device's Allocator. Move-only; destruction (or move-assignment over it)
// returns the block to the allocator's cache. The host memory is 64-byte
// aligned and uninitialised, holding numel elements of physicalSize(dtype)
// bytes (floating dtypes as float32 values rounded to the dtype, see
// numerics.h); the device accounts logicalBytes().
//
// Thread-safety: a Buffer is not synchronised (like the tensor data it holds);
// distinct Buffers may be created and destroyed concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "hpu/device/check.h"
#include "hpu/device/dtype.h"

namespace hpu::device {

class Allocator;
class Device;

class Buffer {
 public:
  // No storage and no device: the state of a moved-from Buffer.
  Buffer() = default;
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { release(); }

  // False for a default-constructed or moved-from Buffer.
  bool valid() const { return owner_ != nullptr; }
  // REQUIRES: valid().
  Device& device() const;
  DType dtype() const { return dtype_; }
  std::size_t numel() const { return numel_; }
  // Bytes the device accounts for: numel * logicalSize(dtype).
  std::uint64_t logicalBytes() const { return static_cast<std::uint64_t>(numel_) * logicalSize(dtype_); }
  // Bytes of host memory the elements occupy: numel * physicalSize(dtype).
  std::size_t hostBytes() const { return numel_ * physicalSize(dtype_); }

  // Null when numel() == 0 or the device is shape-only.
  void* data() { return data_; }
  const void* data() const { return data_; }
  // The elements as T. REQUIRES: sizeof(T) == physicalSize(dtype()).
  template <class T>
  std::span<T> as() {
    HPU_CHECK(sizeof(T) == physicalSize(dtype_), "{} buffer viewed as a {}-byte type", dtypeName(dtype_),
              sizeof(T));
    return {static_cast<T*>(data_), numel_};
  }
  template <class T>
  std::span<const T> as() const {
    HPU_CHECK(sizeof(T) == physicalSize(dtype_), "{} buffer viewed as a {}-byte type", dtypeName(dtype_),
              sizeof(T));
    return {static_cast<const T*>(data_), numel_};
  }

 private:
  friend class Allocator;
  Buffer(Allocator* owner, void* data, DType dtype, std::size_t numel, std::uint32_t sizeClass)
      : owner_(owner), data_(data), numel_(numel), dtype_(dtype), sizeClass_(sizeClass) {}
  void release() noexcept;

  Allocator* owner_ = nullptr;
  void* data_ = nullptr;
  std::size_t numel_ = 0;
  DType dtype_ = DType::kFloat32;
  std::uint32_t sizeClass_ = 0;
};

}  // namespace hpu::device
